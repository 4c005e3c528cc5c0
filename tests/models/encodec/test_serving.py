"""EnCodec behind the server (in process): a WebSocket encode stream of the 24 kHz model (the
stateful encoder stream, audio in ragged binary pushes) returns exactly the offline encode, a
decode stream exactly the offline decode; MusicGen's 32 kHz model decodes over HTTP as the
library does, and its encode stream (not causal) is refused with a clear message."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
from audiotok.server.protocol import tokens_from_binary  # noqa: E402
from tests.helpers import served_client, ws_stream_decode  # noqa: E402


@pytest.fixture(scope="module")
def served(enc_ref, enc32_ref):
    import audiotok

    codecs = {"encodec": audiotok.load(enc_ref.th, bandwidth="6"),
              "musicgen": audiotok.load(enc32_ref.hf_dir)}
    with served_client(codecs) as client:
        yield client, codecs


def test_websocket_encode_stream_equals_the_offline_encode(served):
    client, codecs = served
    audio = (0.2 * np.random.default_rng(5).standard_normal(7777)).astype(np.float32)
    want = codecs["encodec"].encode(torch.from_numpy(audio), 24000).tokens[0].numpy()
    with client.websocket_connect("/v1/stream/encode") as ws:
        ws.send_json({"type": "start", "model": "encodec", "sample_format": "f32le",
                      "token_format": "binary"})
        assert ws.receive_json()["type"] == "ready"
        sent = 0
        for n in (1, 2000, 319, 3000, 2457):
            ws.send_bytes(audio[sent : sent + n].astype("<f4").tobytes())
            sent += n
        ws.send_json({"type": "end"})
        tokens = []
        while (msg := ws.receive()).get("bytes") is not None:
            tokens.append(tokens_from_binary(msg["bytes"], 8))
        done = json.loads(msg["text"])
    assert sent == audio.size
    assert done["type"] == "done" and done["frames"] == want.shape[1] == 25
    np.testing.assert_array_equal(np.concatenate(tokens, 1), want)


def test_websocket_decode_stream_equals_the_offline_decode(served):
    client, codecs = served
    tokens = np.random.default_rng(6).integers(0, 1024, (8, 19))
    want = codecs["encodec"].decode(torch.from_numpy(tokens))[0, 0].numpy()
    ready, got, done = ws_stream_decode(client, "encodec", tokens, (3, 1, 8, 7))
    assert ready["decode"] == "stateful" and done["samples"] == want.size
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5


def test_musicgen_codec_over_http_and_its_encode_stream_refused(served):
    client, codecs = served
    codec = codecs["musicgen"]
    tokens = np.random.default_rng(7).integers(0, 2048, (4, 11))
    r = client.post("/v1/decode?model=musicgen&format=pcm&sample_format=f32le",
                    json={"tokens": tokens.tolist()})
    assert r.status_code == 200, r.text
    want = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    pcm = np.frombuffer(r.content, "<f4")
    assert pcm.shape == want.shape == (11 * 640,) and np.abs(pcm - want).max() <= 1e-5
    with client.websocket_connect("/v1/stream/encode") as ws:
        ws.send_json({"type": "start", "model": "musicgen"})
        doc = ws.receive_json()
    assert doc["type"] == "error" and "not causal" in doc["message"]
