"""DAC behind the server (in process): HTTP encode and decode equal the library, and a
WebSocket decode stream (the stateful stream, tokens in ragged binary pushes) returns exactly
the offline decode, the T x 320 - 8 end of the 16 kHz strides included."""


import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
from tests.bounds import SAME_MODEL
from tests.helpers import served_client, ws_stream_decode  # noqa: E402


@pytest.fixture(scope="module")
def served(dac_refs):
    import audiotok

    codec = audiotok.load(dac_refs("tiny_odd").pth)
    with served_client({"dac": codec}) as client:
        yield client, codec


def test_http_encode_and_decode_equal_the_library(served):
    client, codec = served
    audio = (0.2 * np.random.default_rng(3).standard_normal(5000)).astype(np.float32)
    r = client.post("/v1/encode?model=dac&pcm=f32le&sample_rate=16000&format=json",
                    content=audio.tobytes())
    assert r.status_code == 200, r.text
    want = codec.encode(torch.from_numpy(audio), 16000)
    got = np.asarray(r.json()["tokens"]).reshape(want.tokens[0].shape)
    assert np.array_equal(got, want.tokens[0].numpy())
    r = client.post("/v1/decode?model=dac&format=pcm&sample_format=f32le",
                    json={"tokens": want.tokens[0].tolist()})
    assert r.status_code == 200, r.text
    ref = codec.decode(want.tokens)[0, 0].numpy()
    pcm = np.frombuffer(r.content, "<f4")
    assert pcm.shape == ref.shape == (320 * want.tokens.shape[-1] - 8,)
    assert np.abs(pcm - ref).max() <= SAME_MODEL


def test_websocket_stream_equals_the_offline_decode(served):
    client, codec = served
    tokens = np.random.default_rng(4).integers(0, 1024, (12, 23))
    want = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    ready, got, done = ws_stream_decode(client, "dac", tokens, (1, 5, 2, 15))
    assert ready["type"] == "ready" and ready["decode"] == "stateful", ready
    assert done["type"] == "done" and done["samples"] == want.size == 23 * 320 - 8
    assert got.shape == want.shape and np.abs(got - want).max() <= SAME_MODEL
