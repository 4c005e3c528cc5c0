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
from tests.bounds import SAME_MODEL
from tests.pipeline.conftest import SPEECH  # noqa: E402
from tests.server.conftest import start_server  # noqa: E402


def post(base, path, body, content_type="application/octet-stream"):
    req = urllib.request.Request(f"http://{base}{path}", data=body, method="POST",
                                 headers={"Content-Type": content_type})
    with urllib.request.urlopen(req, timeout=300) as r:  # (a cap for a loaded machine)
        return r.read()


def test_ray_serve_two_replicas_equal_the_library(s2_codec):
    # the "serving" line comes once Ray Serve's proxy routes to the app (a request before that
    # got a 404 or 503 on a loaded machine); the caps are for such a machine, not waits
    p, base, lines = start_server("--ray", "--replicas", "2", "--no-warmup", timeout=600)
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
        assert pcm.shape == ref.shape and np.abs(pcm - ref).max() <= SAME_MODEL
        for push in (1, 7):
            audio, summary, _ = stream_decode(f"ws://{base}", tokens, push_frames=push)
            assert np.abs(audio - ref).max() <= SAME_MODEL and summary["frames"] == 50
    finally:
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=300) == 0


def test_the_serving_line_waits_until_the_proxy_routes():
    """wait_until_routed returns once /healthz answers 200 (a proxy that has not learnt the
    app's routes answers 404, then 503), and gives up with a clear error after its cap."""
    import http.server
    import threading
    import time

    from audiotok.server.ray_serve import wait_until_routed

    answers = [404, 503, 503, 200]
    seen = []

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            self.send_response(answers[min(len(seen), len(answers)) - 1])
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wait_until_routed("0.0.0.0", server.server_address[1], timeout=30)
        assert seen == ["/healthz"] * 4
        answers[:] = [404]
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="did not route to the app within 0.5 s"):
            wait_until_routed("127.0.0.1", server.server_address[1], timeout=0.5)
        assert time.monotonic() - start < 10
    finally:
        server.shutdown()
