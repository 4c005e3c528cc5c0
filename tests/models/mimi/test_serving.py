"""Mimi in the serving engine and `audiotok serve`: decode and encode streams under random
schedules equal the library's offline results (the exactness properties S2's engine tests
check), over HTTP and the WebSocket protocol, and the demo page with a Mimi model."""

import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from audiotok.server import Engine, EngineSettings  # noqa: E402
from audiotok.server.app import ServerSettings, create_app  # noqa: E402
from tests.models.mimi.conftest import speechy  # noqa: E402
from tests.server.schedules import TOL, run_decode_schedule, run_encode_streams  # noqa: E402
from tests.server.test_engine import CORNERS, schedules  # noqa: E402

FRAME = 1920


@settings(max_examples=10, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[0])
@example(plan=CORNERS[1])
@example(plan=CORNERS[2])
def test_decode_streams_equal_offline_under_random_schedules(mimi_codec, plan):
    """1..16 streams opening, pushing 1..8 frames and finishing at random steps, batches of
    1..16 with ragged frame counts: each stream's audio equals its offline decode."""
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"mimi": mimi_codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    run_decode_schedule(engine, mimi_codec, streams, seed, name="mimi")
    assert max(engine.stats.batch_sizes) <= max_batch


def test_encode_streams_equal_offline(mimi_codec):
    """Ragged pushes of samples, streams of different lengths in shared steps (the replicate
    padding of the downsampling conv starts at each stream's own first sample)."""
    rng = np.random.default_rng(3)
    lengths = [1000, FRAME * 5, FRAME * 23 + 333, 60_000]
    audio = [speechy(n, i)[0, 0].numpy() for i, n in enumerate(lengths)]
    engine = Engine({"mimi": mimi_codec}, EngineSettings(max_batch=3, max_step_frames=3),
                    start=False)
    run_encode_streams(engine, mimi_codec, audio, rng, name="mimi", push_chance=0.7)


def test_http_and_websocket(mimi_codec):
    engine = Engine({"mimi": mimi_codec}, EngineSettings(max_streams=4))
    app = create_app(engine, ServerSettings())
    try:
        with TestClient(app) as client:
            models = client.get("/v1/models").json()["models"]
            assert models[0]["codec"] == "mimi" and "CC-BY 4.0" in models[0]["weights_licence"]
            x = speechy(FRAME * 6 + 100, 7)[0, 0].numpy()
            want = mimi_codec.encode(torch.from_numpy(x)).tokens[0].numpy()
            r = client.post("/v1/encode?model=mimi&pcm=f32le&sample_rate=24000",
                            content=x.astype("<f4").tobytes())
            assert r.status_code == 200, r.text
            np.testing.assert_array_equal(np.array(r.json()["tokens"]), want)
            audio = mimi_codec.decode(torch.from_numpy(want))[0, 0].numpy()
            r = client.post("/v1/decode?model=mimi&format=pcm&sample_format=f32le",
                            json={"tokens": want.tolist()})
            assert r.status_code == 200, r.text
            assert np.abs(np.frombuffer(r.content, "<f4") - audio).max() <= TOL
            # a served model takes its own codebook count (serve mimi?codebooks=8 for Moshi)
            r = client.post("/v1/decode?model=mimi", json={"tokens": want[:2].tolist()})
            assert r.status_code == 400 and "must be [4, t]" in r.json()["error"]
            with client.websocket_connect("/v1/stream/decode") as ws:
                ws.send_json({"type": "start", "model": "mimi", "sample_format": "f32le"})
                ready = ws.receive_json()
                assert ready["num_codebooks"] == 4 and ready["sample_rate"] == 24000
                for f in range(want.shape[1]):
                    ws.send_json({"type": "tokens", "tokens": want[:, f: f + 1].tolist()})
                ws.send_json({"type": "end"})
                pcm = []
                while True:
                    msg = ws.receive()
                    if msg.get("bytes") is not None:
                        pcm.append(np.frombuffer(msg["bytes"], "<f4"))
                    elif json.loads(msg["text"])["type"] == "done":
                        break
            assert np.abs(np.concatenate(pcm) - audio).max() <= TOL
    finally:
        engine.close(timeout=10)
