"""SNAC behind the server (in process): HTTP encode and decode equal the library, and a decode
stream fed Orpheus ids or `<custom_token_N>` text as a language model emits them (one id at a
time, text cut anywhere, a code 0, start and end of speech) returns exactly the offline decode
of the whole sequence; bad ids close the stream with a clear reason."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
from audiotok.export.llm import scheme_for  # noqa: E402
from tests.helpers import served_client  # noqa: E402
from tests.models.snac import reference  # noqa: E402

TOL = 1e-5
START, END = 128257, 128258


@pytest.fixture(scope="module")
def codecs(snac_pair, tmp_path_factory):
    import audiotok

    folder = reference.save(reference.snac_model(reference.TINY_ORPHEUS),
                            reference.TINY_ORPHEUS, tmp_path_factory.mktemp("orpheus"))
    return {"orpheus": audiotok.load(folder), "tiny": audiotok.load(snac_pair["tiny_blocks"][1])}


@pytest.fixture(scope="module")
def client(codecs):
    with served_client(codecs) as c:
        yield c


def tokens_with_zeros(frames, seed):
    tokens = np.random.default_rng(seed).integers(0, 4096, (7, frames))
    tokens[:, 2] = 0  # a genuine code 0 in every slot
    return tokens


def run_stream(client, start: dict, messages: list, end: bool = True):
    """(audio, ready, done) of a decode stream fed `messages` (bytes, str: text, list: ids)."""
    with client.websocket_connect("/v1/stream/decode") as ws:
        ws.send_json({"type": "start", "model": "orpheus", "sample_format": "f32le", **start})
        ready = ws.receive_json()
        assert ready["type"] == "ready", ready
        for m in messages:
            if isinstance(m, bytes):
                ws.send_bytes(m)
            elif isinstance(m, str):
                ws.send_json({"type": "text", "text": m})
            else:
                ws.send_json({"type": "ids", "ids": [int(i) for i in m]})
        if end:
            ws.send_json({"type": "end"})
        pcm = []
        while (msg := ws.receive()).get("bytes") is not None:
            assert msg["bytes"], "an empty audio message (a push that made no sample final)"
            pcm.append(np.frombuffer(msg["bytes"], "<f4"))
        return np.concatenate(pcm) if pcm else np.zeros(0, np.float32), ready, \
            json.loads(msg["text"])


def test_orpheus_ids_stream_equals_the_offline_decode(client, codecs):
    codec = codecs["orpheus"]
    tokens = tokens_with_zeros(13, 0)
    want = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    ids = scheme_for("orpheus", codec.codebook_sizes).to_ids(tokens)
    # binary, one id per message, as the LM emits them; 4 ids of a frame never finished
    stream = np.concatenate([[START], ids, ids[:4], [END]]).astype("<i4")
    audio, ready, done = run_stream(client, {"ids": "orpheus"},
                                    [i.tobytes() for i in stream], end=False)
    assert ready["ids"]["scheme"] == "orpheus"
    assert done == {"type": "done", "frames": 13, "samples": 13 * codec.samples_per_frame,
                    "dropped_ids": 4}
    assert audio.shape == want.shape and np.abs(audio - want).max() <= TOL
    # JSON ids in uneven pieces, ended by "end"
    cuts = [0, 1, 8, 30, 31, 60, len(ids)]
    audio, _, done = run_stream(client, {"ids": "orpheus"},
                                [ids[a:b] for a, b in zip(cuts, cuts[1:], strict=False)])
    assert done["dropped_ids"] == 0 and np.abs(audio - want).max() <= TOL


def test_orpheus_text_stream_cut_anywhere(client, codecs):
    codec = codecs["orpheus"]
    tokens = tokens_with_zeros(9, 1)
    want = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    text = "<custom_token_1>" + scheme_for("orpheus", codec.codebook_sizes).to_text(tokens) \
        + "<custom_token_2>"
    cuts = sorted(np.random.default_rng(2).choice(len(text), 25, replace=False))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    audio, _, done = run_stream(client, {"ids": "orpheus"}, pieces, end=False)
    assert done["frames"] == 9 and np.abs(audio - want).max() <= TOL


@pytest.mark.parametrize("start, messages, text", [
    ({"ids": "mini-omni"}, [], "cannot be read as they come"),
    ({"ids": "nope"}, [], "unknown scheme 'nope'"),
    ({"ids": 7}, [], "scheme name"),
    ({"ids": "generic", "ids_offset": -1}, [], "non-negative"),
    ({"ids": "orpheus", "model": "tiny"}, [], "7 rows of 4096"),
    ({"ids": "orpheus"}, [[128266, 128009]], "slot 1"),
    ({"ids": "orpheus"}, ["<custom_token_10><|eot_id|>"], "not a <custom_token_N>"),
    ({"ids": "orpheus"}, [b"\x00\x01\x02"], "int32 ids"),
    ({"ids": "orpheus"}, [[1.5]], "list of integers"),
    ({"ids": "orpheus"}, [{"type": "tokens"}], "ids or text or end"),
])
def test_bad_ids_close_the_stream_with_reason(client, start, messages, text):
    with client.websocket_connect("/v1/stream/decode") as ws:
        ws.send_json({"type": "start", "model": "orpheus", **start})
        for m in messages:
            if isinstance(m, bytes):
                ws.send_bytes(m)
            elif isinstance(m, dict):
                ws.send_json(m)
            elif isinstance(m, str):
                ws.send_json({"type": "text", "text": m})
            else:
                ws.send_json({"type": "ids", "ids": m})
        doc = ws.receive_json()
        if doc["type"] == "ready":
            doc = ws.receive_json()
        assert doc["type"] == "error" and doc["code"] == 1007 and text in doc["message"], doc
    assert client.get("/healthz").status_code == 200


def test_http_encode_and_decode_equal_the_library(client, codecs):
    codec = codecs["tiny"]
    rng = np.random.default_rng(3)
    audio = (0.3 * rng.standard_normal(1000)).astype(np.float32)
    r = client.post(f"/v1/encode?model=tiny&pcm=f32le&sample_rate={codec.sample_rate}"
                    "&format=json", content=audio.tobytes())
    assert r.status_code == 200, r.text
    want = codec.encode(torch.from_numpy(audio))
    got = np.asarray(r.json()["tokens"])
    assert np.array_equal(got.reshape(want.tokens[0].shape), want.tokens[0].numpy())
    r = client.post("/v1/decode?model=tiny&format=pcm&sample_format=f32le",
                    json={"tokens": want.tokens[0].tolist()})
    assert r.status_code == 200, r.text
    ref = codec.decode(want.tokens)[0, 0].numpy()
    assert np.abs(np.frombuffer(r.content, "<f4") - ref).max() <= TOL


def test_orpheus_example_against_a_served_process(codecs, tmp_path):
    """examples/orpheus_audio_stage.py against `audiotok serve` (a real process, loopback):
    the WAV it writes is the offline decode of the ids it sent."""
    import subprocess
    import sys
    from pathlib import Path

    import soundfile as sf

    from tests.server.conftest import start_server

    codec = codecs["orpheus"]
    tokens = tokens_with_zeros(11, 4)
    ids = scheme_for("orpheus", codec.codebook_sizes).to_ids(tokens)
    (tmp_path / "ids.txt").write_text(" ".join(map(str, [START, *ids, END])) + "\n")
    own = codec.streaming.window  # one frame a window, as the docs' 3,1,3 at 24 kHz
    left, lookahead = own.left, own.lookahead
    p, base, _ = start_server("--window", f"{left},1,{lookahead}", model=codec.source)
    try:
        example = Path(__file__).parents[3] / "examples" / "orpheus_audio_stage.py"
        out = subprocess.run([sys.executable, str(example), "--url", f"ws://{base}", "--ids",
                              str(tmp_path / "ids.txt"), "-o", str(tmp_path / "out.wav")],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "11 frames" in out.stdout and "dropped: 0" in out.stdout, out.stdout
        assert "first audio after" in out.stdout
        audio, rate = sf.read(tmp_path / "out.wav", dtype="float32")
        want = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
        assert rate == codec.sample_rate and np.abs(audio - want).max() <= TOL
        bad = subprocess.run([sys.executable, str(example), "--url", f"ws://{base}", "--ids",
                              "-", "-o", str(tmp_path / "bad.wav")], input="128009\n",
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode != 0 and "not an id of frame slot 0" in bad.stderr, bad.stderr
        assert not (tmp_path / "bad.wav").exists()
    finally:
        p.kill()
        p.wait()
