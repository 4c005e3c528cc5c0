"""`audiotok serve --ray`: the same app on Ray Serve with 2 replicas on a local Ray instance
gives the plain server's results (which equal the library's) for encodes, a decode and decode
streams through Ray Serve's proxy; SIGTERM stops it and its Ray instance."""

import io
import json
import os
import signal
import urllib.request

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("ray.serve")
from audiotok.server.client import stream_decode  # noqa: E402
from tests.pipeline.conftest import SPEECH  # noqa: E402
from tests.server.conftest import start_server  # noqa: E402


def post(base, path, body, content_type="application/octet-stream"):
    req = urllib.request.Request(f"http://{base}{path}", data=body, method="POST",
                                 headers={"Content-Type": content_type})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def test_ray_serve_two_replicas_equal_the_library(s2_codec):
    p, base, lines = start_server("--ray", "--replicas", "2", "--no-warmup")
    try:
        assert "(Ray Serve, 2 replicas)" in lines[-1], lines
        want = s2_codec.encode(str(SPEECH)).tokens[0].numpy()
        for _ in range(4):  # several requests, spread by the proxy
            doc = json.loads(post(base, "/v1/encode", SPEECH.read_bytes()))
            np.testing.assert_array_equal(np.array(doc["tokens"]), want)
        tokens = want[:, :50]
        ref = s2_codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
        buf = io.BytesIO()
        np.save(buf, tokens)
        pcm = np.frombuffer(post(base, "/v1/decode?format=pcm&sample_format=f32le",
                                 buf.getvalue()), "<f4")
        assert pcm.shape == ref.shape and np.abs(pcm - ref).max() <= 1e-5
        for push in (1, 7):
            audio, summary, _ = stream_decode(f"ws://{base}", tokens, push_frames=push)
            assert np.abs(audio - ref).max() <= 1e-5 and summary["frames"] == 50
    finally:
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=120) == 0
