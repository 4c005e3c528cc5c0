"""NeuCodec served: 16 kHz in, 24 kHz out. The engine's windowed decode streams give every
frame's 480 samples once (and equal offline decode when a window covers the input); HTTP
encode and decode, and the WebSocket decode stream, equal the library."""

import io

import numpy as np
import pytest
import soundfile as sf
import torch

import audiotok
from tests.models.neucodec.conftest import speech_like

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from audiotok.server import Engine, EngineSettings, WindowSettings  # noqa: E402
from audiotok.server.app import ServerSettings, create_app  # noqa: E402
from tests.bounds import SAME_MODEL
from tests.server.test_app import ws_decode  # noqa: E402
from tests.server.test_engine import push_randomly  # noqa: E402


@pytest.fixture(scope="module")
def codec(small):
    return audiotok.load(small[1])


def test_windowed_decode_streams_have_exact_length(codec):
    tokens = np.random.default_rng(3).integers(0, 65536, (1, 61))
    offline = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    for window in (WindowSettings(4, 3, 2), WindowSettings(80, 80, 80)):
        engine = Engine({"nc": codec}, EngineSettings(window=window), start=False)
        audio = push_randomly(engine, engine.open_decode_stream("nc"), tokens)
        assert audio.shape == offline.shape == (61 * 480,), window
        if window.chunk >= 61:
            assert np.abs(audio - offline).max() <= SAME_MODEL


def test_http_and_websocket_equal_the_library(codec):
    engine = Engine({"nc": codec}, EngineSettings(max_streams=2))
    try:
        app = create_app(engine, ServerSettings())
        with TestClient(app) as client:
            model = client.get("/v1/models").json()["models"][0]
            assert (model["sample_rate"], model["input_sample_rate"]) == (24000, 16000)
            x = speech_like(24000, 4)  # 1.5 s at 16 kHz, sent as a 16 kHz WAV
            buf = io.BytesIO()
            sf.write(buf, x, 16000, format="WAV", subtype="FLOAT")
            r = client.post("/v1/encode", content=buf.getvalue())
            assert r.status_code == 200, r.text
            want = codec.encode(x, 16000)
            doc = r.json()
            assert np.array_equal(np.array(doc["tokens"]), want.tokens[0].numpy())
            assert (doc["frames"], doc["num_samples"], doc["sample_rate"]) == (75, 75 * 480, 24000)
            r = client.post("/v1/decode?format=wav", json={"tokens": doc["tokens"]})
            audio, rate = sf.read(io.BytesIO(r.content), dtype="float32")
            offline = codec.decode(want)[0, 0].numpy()
            assert rate == 24000 and audio.shape == offline.shape == (75 * 480,)
            assert np.abs(audio - offline).max() <= 1 / 32767 + SAME_MODEL
            streamed, done = ws_decode(client, want.tokens[0].numpy(), model="nc", push=7)
            assert streamed.shape == (75 * 480,) and done["samples"] == 75 * 480
    finally:
        engine.close(timeout=10)
