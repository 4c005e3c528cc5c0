"""The Qwen3-TTS tokenizer behind `audiotok serve`: a WebSocket decode stream and HTTP encode
equal the library's offline results; its encode streams are offered with attention="window"
only, and refused clearly with full attention."""

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")

from tests.bounds import SAME_MODEL
from tests.helpers import served_client, ws_stream_decode  # noqa: E402


@pytest.fixture(scope="module")
def served(qwen_small):
    import audiotok

    model = qwen_small[1]["model"]
    codecs = {"qwen": audiotok.load(model), "qwen-window": audiotok.load(model, attention="window")}
    with served_client(codecs) as client:
        yield client, codecs


def test_streams_and_http(served):
    client, codecs = served
    models = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert models["qwen"]["streaming"]["encode"] is False
    assert models["qwen-window"]["streaming"]["encode"] is True
    assert "Apache-2.0" in models["qwen"]["weights_licence"]
    tokens = np.random.default_rng(8).integers(0, 2048, (16, 23))
    want = codecs["qwen"].decode(torch.from_numpy(tokens))[0, 0].numpy()
    _, got, done = ws_stream_decode(client, "qwen", tokens, (1, 7, 15))
    assert done["samples"] == want.size == 23 * 1920
    assert np.abs(got - want).max() <= SAME_MODEL
    audio = (0.2 * np.random.default_rng(9).standard_normal(24001)).astype(np.float32)
    r = client.post("/v1/encode?model=qwen&pcm=f32le&sample_rate=24000&format=json",
                    content=audio.astype("<f4").tobytes())
    assert r.status_code == 200, r.text
    want = codecs["qwen"].encode(torch.from_numpy(audio), 24000).tokens[0].numpy()
    assert np.array_equal(np.asarray(r.json()["tokens"]), want)
    with client.websocket_connect("/v1/stream/encode") as ws:
        ws.send_json({"type": "start", "model": "qwen"})
        doc = ws.receive_json()
    assert doc["type"] == "error" and "no bounded encoder state" in doc["message"]
