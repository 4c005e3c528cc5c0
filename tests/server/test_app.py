"""The HTTP and WebSocket app (in process, Starlette's TestClient): results equal the library's,
every bad request gets a clear 4xx or close code, and nothing disturbs the other streams."""

import io
import json
import random
import re
import time

import numpy as np
import pytest
import soundfile as sf
import torch

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from starlette.websockets import WebSocketDisconnect  # noqa: E402

from audiotok.server import Engine, EngineSettings  # noqa: E402
from audiotok.server.app import ServerSettings, create_app  # noqa: E402
from audiotok.server.protocol import tokens_to_binary  # noqa: E402
from tests.pipeline.conftest import SPEECH  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module")
def engine(s2_codec, xc_codec):
    e = Engine({"s2": s2_codec, "xc": xc_codec}, EngineSettings(max_streams=4))
    yield e
    e.close(timeout=10)


@pytest.fixture(scope="module")
def client(engine):
    app = create_app(engine, ServerSettings(max_body_bytes=2_000_000, idle_timeout=2.0,
                                            max_message_bytes=100_000))
    with TestClient(app) as c:
        yield c


def random_tokens(codec, frames, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n, (frames,), generator=g)
                        for n in codec.codebook_sizes]).numpy()


def test_models_health_and_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"ready": True, "warmup": {}}  # none was asked for
    models = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert models["s2"]["codec"] == "s2" and models["s2"]["streaming"]["decode"] == "exact"
    assert models["xc"]["streaming"] == {"decode": "windowed", "encode": False}
    assert "Research License" in models["s2"]["weights_licence"]
    text = client.get("/metrics").text
    for name in ("audiotok_open_streams", "audiotok_first_audio_seconds_bucket",
                 "audiotok_http_requests_total", "audiotok_batch_bucket"):
        assert name in text


def test_encode_formats_equal_the_library(client, s2_codec, xc_codec):
    body = SPEECH.read_bytes()
    for name, codec in (("s2", s2_codec), ("xc", xc_codec)):
        want = codec.encode(str(SPEECH)).tokens[0].numpy()
        r = client.post(f"/v1/encode?model={name}", content=body)
        assert r.status_code == 200, r.text
        doc = r.json()
        np.testing.assert_array_equal(np.array(doc["tokens"]), want)
        assert doc["frames"] == want.shape[1]
        assert doc["source_sample_rate"] == sf.info(SPEECH).samplerate
        r = client.post(f"/v1/encode?model={name}&format=npy", content=body)
        np.testing.assert_array_equal(np.load(io.BytesIO(r.content)), want)
    r = client.post("/v1/encode?model=s2&format=codes", content=body)
    from audiotok.codes import load_codes_bytes

    codes = load_codes_bytes(r.content)
    assert codes.codec == "s2" and int(codes.num_samples[0]) == int(r.headers["X-Num-Samples"])
    # raw PCM, 16-bit stereo: downmixed and resampled like a file
    x, rate = sf.read(SPEECH, dtype="int16")
    stereo = np.stack([x, x], 1).astype("<i2").tobytes()
    r = client.post(f"/v1/encode?model=s2&pcm=s16le&sample_rate={rate}&channels=2", content=stereo)
    want = s2_codec.encode(torch.from_numpy(x.astype(np.float32) / 32768), rate)
    np.testing.assert_array_equal(np.array(r.json()["tokens"]), want.tokens[0].numpy())


def test_decode_formats_equal_the_library(client, s2_codec, xc_codec):
    tokens = random_tokens(s2_codec, 20, 1)
    want = s2_codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    r = client.post("/v1/decode?model=s2&format=pcm&sample_format=f32le",
                    json={"tokens": tokens.tolist()})
    assert r.headers["X-Sample-Rate"] == "44100" and r.headers["X-Sample-Format"] == "f32le"
    assert np.abs(np.frombuffer(r.content, "<f4") - want).max() <= TOL
    buf = io.BytesIO()
    np.save(buf, tokens)
    for fmt in ("wav", "flac", "ogg"):
        r = client.post(f"/v1/decode?model=s2&format={fmt}", content=buf.getvalue())
        assert r.status_code == 200, r.text
        audio, rate = sf.read(io.BytesIO(r.content), dtype="float32")
        assert rate == 44100 and audio.shape == want.shape
        if fmt != "ogg":
            assert np.abs(audio - want).max() <= 1 / 32767 + TOL
    # streamed: WAV with a streaming header, same samples
    r = client.post("/v1/decode?model=s2&stream=true&sample_format=f32le",
                    json={"tokens": tokens.tolist(), "num_samples": 30000})
    assert r.content[4:8] == b"\xff\xff\xff\xff"
    streamed = np.frombuffer(r.content[44:], "<f4")
    assert streamed.shape == (30000,) and np.abs(streamed - want[:30000]).max() <= TOL
    # a batch [B, K, T] decodes to npz
    xt = np.stack([random_tokens(xc_codec, 30, 2), random_tokens(xc_codec, 30, 3)])
    r = client.post("/v1/decode?model=xc&format=npz", json={"tokens": xt.tolist()})
    z = np.load(io.BytesIO(r.content))
    want = xc_codec.decode(torch.from_numpy(xt)).numpy()[:, 0]
    assert np.abs(z["audio"] - want).max() <= TOL and list(z["num_samples"]) == [9600, 9600]


@pytest.mark.parametrize("method, url, kw, status, message", [
    ("post", "/v1/decode?model=s2", dict(content=b"{not json"), 400, "not valid JSON"),
    ("post", "/v1/decode?model=s2", dict(json={"tok": []}), 400, '"tokens" key'),
    ("post", "/v1/decode?model=s2", dict(json={"tokens": [[1, 2], [3]]}), 400, "rectangular"),
    ("post", "/v1/decode?model=s2", dict(json={"tokens": [[1.5] * 3] * 10}), 400, "integers"),
    ("post", "/v1/decode?model=s2", dict(json={"tokens": [[0] * 3] * 9}), 400,
     r"must be \[10, t\]"),
    ("post", "/v1/decode?model=s2", dict(json={"tokens": [[300] * 3] * 10}), 400,
     "token 300 at codebook 0, frame 0"),
    ("post", "/v1/decode?model=nope", dict(json={"tokens": [[0]] * 10}), 404,
     "unknown model 'nope'; loaded: s2, xc"),
    ("post", "/v1/decode?model=s2&format=mp3", dict(json={"tokens": [[0]] * 10}), 400,
     "unknown format 'mp3'"),
    ("post", "/v1/decode?model=xc&stream=true", dict(json={"tokens": [[0]]}), 400,
     "not causal"),
    ("post", "/v1/decode", dict(json={"tokens": [[0]] * 10}), 400, "several models"),
    ("post", "/v1/decode?model=s2", dict(content=b"\x93NUMPYgarbage"), 400, ".npy"),
    ("post", "/v1/decode?model=s2", dict(content=b"PK\x03\x04junk"), 400, "cannot read codes"),
    ("post", "/v1/encode?model=s2", dict(content=b"RIFF0000WAVEjunk"), 400,
     "cannot read audio"),
    ("post", "/v1/encode?model=s2", dict(content=b""), 400, "empty body"),
    ("post", "/v1/encode?model=s2&pcm=s24", dict(content=b"\0\0"), 400, "sample_format"),
    ("post", "/v1/encode?model=s2&pcm=s16le", dict(content=b"\0\0"), 400, "sample_rate="),
    ("post", "/v1/encode?model=s2&pcm=f32le&sample_rate=16000", dict(content=b"\0\0\0"), 400,
     "whole number of 4-byte samples"),
    ("post", "/v1/encode?model=s2", dict(content=b"x" * 2_000_001), 413, "over the limit"),
])
def test_bad_requests_get_clear_answers(client, method, url, kw, status, message):
    r = getattr(client, method)(url, **kw)
    assert r.status_code == status, r.text
    import re
    assert re.search(message, r.json()["error"]), r.json()["error"]
    assert client.get("/healthz").status_code == 200


def test_too_long_audio_is_refused(s2_codec):
    engine = Engine({"s2": s2_codec}, EngineSettings(max_request_seconds=0.5))
    try:
        with TestClient(create_app(engine)) as c:
            r = c.post("/v1/encode", content=SPEECH.read_bytes())  # 1 model: model= optional
            assert r.status_code == 400 and "over the limit of 0.5 s" in r.json()["error"]
    finally:
        engine.close(timeout=5)


def test_api_key(s2_codec):
    engine = Engine({"s2": s2_codec})
    try:
        with TestClient(create_app(engine, ServerSettings(api_key="sesame"))) as c:
            assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
            assert c.get("/v1/models").status_code == 401
            assert c.get("/v1/models", headers={"Authorization": "Bearer nope"}).status_code \
                == 401
            assert c.get("/v1/models", headers={"Authorization": "Bearer sesame"}).status_code \
                == 200
            assert c.get("/v1/models", headers={"X-API-Key": "sesame"}).status_code == 200
            with c.websocket_connect("/v1/stream/decode") as ws:
                assert ws.receive_json()["code"] == 1008
            with c.websocket_connect("/v1/stream/decode?api_key=sesame") as ws:
                ws.send_json({"type": "start"})
                assert ws.receive_json()["type"] == "ready"
    finally:
        engine.close(timeout=5)


def ws_decode(client, tokens, model="s2", push=3, binary=True, sample_format="f32le"):
    with client.websocket_connect("/v1/stream/decode") as ws:
        ws.send_json({"type": "start", "model": model, "sample_format": sample_format})
        ready = ws.receive_json()
        assert ready["type"] == "ready" and ready["num_codebooks"] == tokens.shape[0]
        for a in range(0, tokens.shape[1], push):
            chunk = tokens[:, a: a + push]
            if binary:
                ws.send_bytes(tokens_to_binary(chunk))
            else:
                ws.send_json({"type": "tokens", "tokens": chunk.tolist()})
        ws.send_json({"type": "end"})
        pcm = []
        while True:
            msg = ws.receive()
            if msg.get("bytes") is not None:
                pcm.append(np.frombuffer(msg["bytes"], "<f4" if sample_format == "f32le"
                                         else "<i2"))
            else:
                done = json.loads(msg["text"])
                break
        assert done["type"] == "done", done
        return np.concatenate(pcm), done


def test_websocket_decode_equals_offline(client, s2_codec, xc_codec):
    tokens = random_tokens(s2_codec, 17, 5)
    want = s2_codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    for binary in (True, False):
        audio, done = ws_decode(client, tokens, binary=binary)
        assert np.abs(audio - want).max() <= TOL
        assert done == {"type": "done", "frames": 17, "samples": 17 * 2048}
    pcm16, _ = ws_decode(client, tokens, push=1, sample_format="s16le")
    assert np.abs(pcm16 / 32767 - want).max() <= 1 / 32767 + TOL
    xt = random_tokens(xc_codec, 90, 6)  # windowed: exact length
    audio, done = ws_decode(client, xt, model="xc", push=7)
    assert audio.shape == (90 * 320,) and done["samples"] == 90 * 320


def ws_encode(client, audio, chunk, **start):
    """Tokens [K, T] of mono f32 audio sent over /v1/stream/encode `chunk` samples at a time."""
    with client.websocket_connect("/v1/stream/encode") as ws:
        ws.send_json({"type": "start", "model": "s2", "sample_format": "f32le", **start})
        assert ws.receive_json()["type"] == "ready"
        for a in range(0, audio.size, chunk):
            ws.send_bytes(audio[a: a + chunk].astype("<f4").tobytes())
        ws.send_json({"type": "end"})
        tokens = []
        while (doc := ws.receive_json())["type"] == "tokens":
            tokens.append(np.array(doc["tokens"]))
        assert doc["type"] == "done"
        with pytest.raises(WebSocketDisconnect):
            ws.receive_json()
    return np.concatenate(tokens, 1)


def test_websocket_encode_equals_offline(client, s2_codec):
    import soxr

    from audiotok.audio import resample

    x, rate = sf.read(SPEECH, dtype="float32")  # 22.05 kHz: resampled in the stream
    got = ws_encode(client, x, 3000, sample_rate=rate, token_format="json")
    # the stream resamples as it goes: soxr's stream, whatever the chunking
    x44 = soxr.ResampleStream(rate, 44100, 1, dtype="float32", quality="HQ").resample_chunk(
        x, last=True)
    np.testing.assert_array_equal(got, s2_codec.encode(torch.from_numpy(x44)).tokens[0])
    # at the codec's rate: exactly the library's encode of the file
    got = ws_encode(client, resample(x, rate, 44100), 5000)
    np.testing.assert_array_equal(got, s2_codec.encode(str(SPEECH)).tokens[0].numpy())


@pytest.mark.parametrize("messages, code, text", [
    ([b"\x00\x01"], 1007, "expected a JSON message"),
    (["{oops"], 1007, "not valid JSON"),
    ([{"type": "begin"}], 1007, "type start"),
    ([{"type": "start", "model": "zzz"}], 1007, "unknown model"),
    ([{"type": "start", "model": "s2", "sample_format": "u8"}], 1007, "sample_format"),
    ([{"type": "start", "model": "s2"}, b"\x00" * 7], 1007, "whole frames"),
    ([{"type": "start", "model": "s2"}, {"type": "tokens", "tokens": [[1]]}], 1007,
     r"must be \[10, t\]"),
    ([{"type": "start", "model": "s2"}, {"type": "tokens", "tokens": [[999]] * 10}], 1007,
     "token 999"),
    ([{"type": "start", "model": "s2"}, "x" * 100_001], 1009, "over the limit"),
    ([{"type": "start", "model": "s2"}, {"type": "flush"}], 1007, "tokens or end"),
    ([{"type": "start", "model": "xc"}], None, None),  # fine: ready
])
def test_websocket_bad_messages_close_with_reason(client, messages, code, text):
    with client.websocket_connect("/v1/stream/decode") as ws:
        for m in messages:
            if isinstance(m, bytes):
                ws.send_bytes(m)
            elif isinstance(m, str):
                ws.send_text(m)
            else:
                ws.send_json(m)
        doc = ws.receive_json()
        if code is None:
            assert doc["type"] == "ready"
            return
        if doc["type"] == "ready":
            doc = ws.receive_json()
        assert doc["type"] == "error" and doc["code"] == code, doc
        assert re.search(text, doc["message"]), doc
        with pytest.raises(WebSocketDisconnect) as e:
            ws.receive_json()
        assert e.value.code == code


def test_idle_stream_is_closed(client):
    with client.websocket_connect("/v1/stream/decode") as ws:
        ws.send_json({"type": "start", "model": "s2"})
        ws.receive_json()
        doc = ws.receive_json()  # idle_timeout is 2 s here
        assert doc["code"] == 1008 and "idle" in doc["message"]


def test_too_many_streams_close_1013(client, engine):
    opened = []
    try:
        for _ in range(4):  # max_streams=4
            ws = client.websocket_connect("/v1/stream/decode")
            ws.__enter__()
            ws.send_json({"type": "start", "model": "s2"})
            assert ws.receive_json()["type"] == "ready"
            opened.append(ws)
        with client.websocket_connect("/v1/stream/decode") as ws:
            ws.send_json({"type": "start", "model": "s2"})
            doc = ws.receive_json()
            assert doc["code"] == 1013 and "open streams" in doc["message"]
    finally:
        for ws in opened:
            ws.__exit__(None, None, None)  # clients that vanish: their slots come back
    deadline = time.monotonic() + 10
    while engine.load()["s2"]["streams"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.load()["s2"]["streams"] == 0


def test_fuzzed_protocol_never_disturbs_a_neighbour(client, s2_codec):
    """Random bytes and random JSON at every step of other connections, while one stream
    decodes: the stream stays exact and the server keeps answering."""
    rng = random.Random(0)
    tokens = random_tokens(s2_codec, 12, 8)
    want = s2_codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    junk_json = [{}, [], None, 1, "s", {"type": None}, {"type": "start", "model": 3},
                 {"type": "tokens", "tokens": "x"}, {"type": "tokens", "tokens": [[[[1]]]]},
                 {"type": "tokens", "tokens": [[-1] * 2] * 10}, {"type": "end", "x": 1}]
    with client.websocket_connect("/v1/stream/decode") as good:
        good.send_json({"type": "start", "model": "s2", "sample_format": "f32le"})
        good.receive_json()
        out = []
        for f in range(12):
            with client.websocket_connect("/v1/stream/decode") as bad:
                steps = rng.randint(0, 3)
                if steps:
                    bad.send_json({"type": "start", "model": "s2"})
                for _ in range(steps):
                    if rng.random() < 0.5:
                        bad.send_bytes(bytes(rng.getrandbits(8)
                                             for _ in range(rng.randint(1, 200))))
                    else:
                        bad.send_text(json.dumps(rng.choice(junk_json)))
                bad.send_bytes(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 50))))
            good.send_bytes(tokens_to_binary(tokens[:, f: f + 1]))
            out.append(np.frombuffer(good.receive_bytes(), "<f4"))
            r = client.post("/v1/decode?model=s2", content=bytes(rng.getrandbits(8)
                                                                   for _ in range(64)))
            assert r.status_code == 400
        good.send_json({"type": "end"})
        assert good.receive_json()["type"] == "done"
    assert np.abs(np.concatenate(out) - want).max() <= TOL
    assert client.get("/healthz").status_code == 200
