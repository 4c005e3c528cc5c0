"""EnCodec behind the server (in process): a WebSocket encode stream of the 24 kHz model (the
stateful encoder stream, audio in ragged binary pushes) returns exactly the offline encode, a
decode stream exactly the offline decode; MusicGen's 32 kHz model decodes over HTTP as the
library does, and its encode stream (not causal) is refused with a clear message. The 48 kHz
stereo model (segments, each with its scale) streams both ways through the engine under random
schedules, equal to the library (tokens and scales bit for bit, audio within SAME_MODEL), and over
HTTP and the WebSocket with its scales."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from audiotok.errors import AudioError, CodesError

pytest.importorskip("fastapi")
from audiotok.server.protocol import tokens_from_binary, tokens_to_binary  # noqa: E402
from tests.bounds import SAME_MODEL
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
    assert ready["channels"] == 1 and "segment_scales" not in ready
    assert got.shape == want.shape and np.abs(got - want).max() <= SAME_MODEL
    with client.websocket_connect("/v1/stream/decode") as ws:  # no scales for these codes
        ws.send_json({"type": "start", "model": "encodec"})
        ws.receive_json()
        ws.send_json({"type": "scales", "scales": [1.0]})
        doc = ws.receive_json()
    assert doc["type"] == "error" and "expected a message of type tokens or end" in doc["message"]


def test_musicgen_codec_over_http_and_its_encode_stream_refused(served):
    client, codecs = served
    codec = codecs["musicgen"]
    tokens = np.random.default_rng(7).integers(0, 2048, (4, 11))
    r = client.post("/v1/decode?model=musicgen&format=pcm&sample_format=f32le",
                    json={"tokens": tokens.tolist()})
    assert r.status_code == 200, r.text
    want = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    pcm = np.frombuffer(r.content, "<f4")
    assert pcm.shape == want.shape == (11 * 640,) and np.abs(pcm - want).max() <= SAME_MODEL
    with client.websocket_connect("/v1/stream/encode") as ws:
        ws.send_json({"type": "start", "model": "musicgen"})
        doc = ws.receive_json()
    assert doc["type"] == "error" and "not causal" in doc["message"]


# -- the 48 kHz stereo model: segments, each with its scale ---------------------------------------
def stereo(n: int, seed: int) -> np.ndarray:
    return (0.2 * np.random.default_rng(seed).standard_normal((2, n))).astype(np.float32)


@pytest.fixture(scope="module")
def codec48(enc48_ref):
    import audiotok

    return audiotok.load(enc48_ref.th)


def offline48(codec, audio: np.ndarray):
    """(tokens [K, T], scales [S], audio [2, n]: the decode without a length) of audio."""
    codes = codec.encode(torch.from_numpy(audio), 48000)
    full = codec.decode(dataclasses.replace(codes, num_samples=None))[0].numpy()
    return codes.tokens[0].numpy(), codes.scales[0].numpy(), full


def test_48khz_engine_streams_equal_offline_under_random_schedules(codec48):
    """Encode streams (stereo and mono input, ragged pushes, several streams a step) give the
    offline tokens and scales; decode streams given tokens and scales in random pieces and
    orders give the offline audio (within SAME_MODEL: the library's decode runs its segments' LSTMs
    as one batch, the engine each segment alone; measured 1e-6); offline requests too."""
    from audiotok.server import Engine, EngineSettings, ScaledTokens

    rng = np.random.default_rng(11)
    lengths = (1000, 48000, 96500)  # one short segment; one whole; 150 + 150 + 5 frames
    audio = [stereo(n, i) for i, n in enumerate(lengths)]
    audio[0] = audio[0][0]  # mono input: on both channels, as the library encodes it
    want = [offline48(codec48, a) for a in audio]
    engine = Engine({"e": codec48}, EngineSettings(max_batch=2), start=False)
    assert engine.models["e"].runners["decode"].mode == "segments"
    enc = [engine.open_encode_stream("e") for _ in audio]
    dec = [engine.open_decode_stream("e") for _ in audio]
    sent, fed, given = [0] * 3, [0] * 3, [0] * 3
    tokens, audio_out = [[] for _ in audio], [[] for _ in audio]
    for _ in range(400):
        for i, (x, (t, sc, _)) in enumerate(zip(audio, want, strict=True)):
            if enc[i].state == "open" and rng.random() < 0.7:
                n = int(rng.integers(1, 20000))
                enc[i].push(x[..., sent[i] : sent[i] + n])
                sent[i] += n
                if sent[i] >= x.shape[-1]:
                    enc[i].finish()
            if dec[i].state != "open":
                continue
            if fed[i] < t.shape[1] and rng.random() < 0.6:
                n = int(rng.integers(1, 60))
                dec[i].push(t[:, fed[i] : fed[i] + n])
                fed[i] += n
            if given[i] < sc.shape[0] and rng.random() < 0.2:
                dec[i].push(t[:, :0], sc[given[i] : given[i] + 1])
                given[i] += 1
            if fed[i] >= t.shape[1] and given[i] == sc.shape[0]:
                dec[i].finish()
        engine.step()
        for i in range(len(audio)):
            tokens[i] += enc[i].available()
            audio_out[i] += dec[i].available()
        if all(s.state == "done" for s in enc + dec):
            break
    for i, (t, sc, full) in enumerate(want):
        assert enc[i].state == dec[i].state == "done", i
        np.testing.assert_array_equal(np.concatenate(tokens[i], 1), t)
        np.testing.assert_array_equal(enc[i].scales(), sc)
        got = np.concatenate(audio_out[i], -1)
        assert got.shape == full.shape and np.abs(got - full).max() <= SAME_MODEL, i
    futures = [engine.encode("e", audio[2]), engine.decode("e", want[2][0], scales=want[2][1])]
    while not all(f.done() for f in futures):
        engine.step()
    encoded, decoded = (f.result() for f in futures)
    assert isinstance(encoded, ScaledTokens)
    np.testing.assert_array_equal(encoded.tokens, want[2][0])
    np.testing.assert_array_equal(encoded.scales, want[2][1])
    assert decoded.shape == want[2][2].shape and np.abs(decoded - want[2][2]).max() <= SAME_MODEL
    with pytest.raises(CodesError, match="305 frames are 3 segments; got 2 scales"):
        engine.decode("e", want[2][0], scales=want[2][1][:2])
    with pytest.raises(AudioError, match=r"must be \[2, n\]"):
        engine.encode("e", np.zeros((3, 100), np.float32))
    # a segment without a scale at the end: that stream fails alone, with a clear error
    s = engine.open_decode_stream("e")
    s.push(want[1][0])
    s.finish()
    while s.state == "finishing":
        engine.step()
    assert s.state == "failed" and "has no scale" in str(s.error)
    engine.close()


def test_48khz_bfloat16_engine_encode_stream_equals_the_offline_encode(enc48_ref):
    """In bfloat16 the engine gives an encode stream its pushes in float32 (the codec's
    stream_input_dtype): each segment is scaled as encode() scales it, then cast."""
    import audiotok
    from audiotok.server import Engine, EngineSettings

    bf16 = audiotok.load(enc48_ref.th, dtype="bfloat16")
    x = stereo(50000, 5)
    want = bf16.encode(torch.from_numpy(x), 48000)
    engine = Engine({"e": bf16}, EngineSettings(max_batch=2), start=False)
    s = engine.open_encode_stream("e")
    for at in range(0, x.shape[-1], 9000):
        s.push(x[..., at : at + 9000])
    s.finish()
    tokens = []
    while s.state != "done":
        engine.step()
        tokens += s.available()
    engine.close()
    np.testing.assert_array_equal(np.concatenate(tokens, 1), want.tokens[0].numpy())
    np.testing.assert_array_equal(s.scales(), want.scales[0].numpy())


def test_48khz_over_http_and_websocket(codec48):
    """Offline encode (interleaved stereo PCM) and decode (with the scales, in JSON and in a
    .codes archive) over HTTP; encode and decode streams over the WebSocket, the scales as
    their own messages: all equal the library (the audio within SAME_MODEL)."""
    from audiotok.audio import write_audio_bytes
    from audiotok.codes import load_codes_bytes

    x = stereo(60000, 5)
    t, sc, full = offline48(codec48, x)
    with served_client({"e48": codec48}) as client:
        model = client.get("/v1/models").json()["models"][0]
        assert model["channels"] == 2 and model["streaming"]["decode"] == "segments"
        pcm = x.T.astype("<f4").tobytes()  # interleaved
        r = client.post("/v1/encode?pcm=f32le&sample_rate=48000&channels=2", content=pcm)
        assert r.status_code == 200, r.text
        doc = r.json()
        np.testing.assert_array_equal(np.array(doc["tokens"]), t)
        assert doc["scales"] == sc.tolist()
        r = client.post("/v1/encode?pcm=f32le&sample_rate=48000&channels=2&format=codes",
                        content=pcm)
        codes = load_codes_bytes(r.content)
        assert torch.equal(codes.scales[0], torch.from_numpy(sc))
        r = client.post("/v1/encode?pcm=f32le&sample_rate=48000&channels=2", content=pcm[:12])
        assert r.status_code == 400 and "3 samples do not split into 2 channels" in r.text
        r = client.post("/v1/encode?format=npy", content=pcm)
        assert r.status_code == 400 and "segment scales" in r.json()["error"]
        r = client.post("/v1/decode?format=pcm&sample_format=f32le",
                        json={"tokens": t.tolist(), "scales": sc.tolist()})
        assert r.status_code == 200, r.text
        assert r.headers["X-Channels"] == "2"
        got = np.frombuffer(r.content, "<f4").reshape(-1, 2).T  # (segment by segment, as
        assert got.shape == full.shape and np.abs(got - full).max() <= SAME_MODEL  # streams)
        r = client.post("/v1/decode?format=wav", content=r_codes(client, pcm))
        assert r.status_code == 200, r.text
        wav = read_wav(r.content)
        assert wav.shape == (2, 60000)  # the decode above, as 16-bit PCM:
        assert np.array_equal(wav, read_wav(write_audio_bytes(got[:, :60000].T, 48000, "WAV",
                                                              "PCM_16")))
        r = client.post("/v1/decode", json={"tokens": t.tolist(), "scales": sc[:1].tolist()})
        assert r.status_code == 400 and "got 1 scales" in r.json()["error"]
        for bad in ([1.0, -2.0], ["a", "b"], [[1.0, 2.0], [1.0, 2.0]], 3):
            r = client.post("/v1/decode", json={"tokens": t.tolist(), "scales": bad})
            assert r.status_code == 400 and "scales" in r.json()["error"], bad
        for start, message in (({"channels": 3}, "channels must be 1 or 2"),
                               ({"channels": True}, "channels must be 1 or 2"),
                               ({"channels": 2.0}, "channels must be 1 or 2")):
            with client.websocket_connect("/v1/stream/encode") as ws:
                ws.send_json({"type": "start", **start})
                doc = ws.receive_json()
                assert doc["type"] == "error" and message in doc["message"], doc
        with client.websocket_connect("/v1/stream/decode") as ws:
            ws.send_json({"type": "start"})
            ws.receive_json()
            ws.send_json({"type": "scales", "scales": [1.0, float("nan")]})
            doc = ws.receive_json()
            assert doc["type"] == "error" and doc["code"] == 1007 and "scales" in doc["message"]

        with client.websocket_connect("/v1/stream/encode") as ws:
            ws.send_json({"type": "start", "model": "e48", "sample_format": "f32le",
                          "token_format": "binary"})
            ready = ws.receive_json()
            assert ready["channels"] == 2 and ready["segment_scales"] is True
            at = 0
            for n in (1, 30000, 2999, 27000, 1, 10000, 10000):
                ws.send_bytes(x[:, at : at + n].T.astype("<f4").tobytes())
                at += n
            ws.send_json({"type": "end"})
            got_tokens, got_scales = [], []
            while (msg := ws.receive()).get("bytes") is not None or \
                    json.loads(msg["text"])["type"] == "scales":
                if msg.get("bytes") is not None:
                    got_tokens.append(tokens_from_binary(msg["bytes"], 16))
                else:
                    doc = json.loads(msg["text"])
                    assert doc["first"] == len(got_scales)
                    got_scales += doc["scales"]
                    assert len(got_scales) * 150 >= sum(a.shape[1] for a in got_tokens)
        np.testing.assert_array_equal(np.concatenate(got_tokens, 1), t)
        assert got_scales == sc.tolist()

        with client.websocket_connect("/v1/stream/decode") as ws:
            ws.send_json({"type": "start", "model": "e48", "sample_format": "f32le"})
            assert ws.receive_json()["segment_scales"] is True
            for a in range(0, t.shape[1], 40):
                ws.send_bytes(tokens_to_binary(t[:, a : a + 40]))
                if a == 120:
                    ws.send_json({"type": "scales", "scales": sc.tolist()})
            ws.send_json({"type": "end"})
            out = []
            while (msg := ws.receive()).get("bytes") is not None:
                out.append(np.frombuffer(msg["bytes"], "<f4"))
            assert json.loads(msg["text"])["type"] == "done"
        got = np.concatenate(out).reshape(-1, 2).T
        assert got.shape == full.shape and np.abs(got - full).max() <= SAME_MODEL


def r_codes(client, pcm: bytes) -> bytes:
    """The .codes archive /v1/encode gives for interleaved stereo PCM."""
    return client.post("/v1/encode?pcm=f32le&sample_rate=48000&channels=2&format=codes",
                       content=pcm).content


def read_wav(data: bytes) -> np.ndarray:
    import io

    import soundfile as sf

    x, _ = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return x.T
