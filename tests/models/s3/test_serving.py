"""An encode-only family behind the server, the command line and a corpus run: encoding works
and equals the library; every way to decode says why it cannot, and nothing else breaks."""

import io
import json

import pytest
import soundfile as sf

import audiotok
from tests.models.s3 import reference

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def s3_codec(s3_refs):
    return audiotok.load(s3_refs("v2_25hz").pt)


def test_http_and_websocket(s3_codec):
    from fastapi.testclient import TestClient

    from audiotok.server import Engine, EngineSettings
    from audiotok.server.app import ServerSettings, create_app

    engine = Engine({"s3": s3_codec}, EngineSettings(max_streams=2))
    try:
        with TestClient(create_app(engine, ServerSettings(idle_timeout=5.0))) as c:
            models = c.get("/v1/models").json()["models"]
            assert models[0]["decodes"] is False and models[0]["streaming"] == {
                "decode": None, "encode": False}
            w = reference.speech_like(40000)
            buf = io.BytesIO()
            sf.write(buf, w.numpy(), 16000, format="WAV", subtype="FLOAT")
            r = c.post("/v1/encode?model=s3", content=buf.getvalue(),
                       headers={"content-type": "audio/wav"})
            assert r.status_code == 200
            assert r.json()["tokens"] == s3_codec.encode(w[None], 16000).tokens[0].tolist()
            r = c.post("/v1/decode?model=s3", json={"tokens": [[1, 2, 3]]})
            assert r.status_code == 400 and "token-to-audio" in r.json()["error"]
            with c.websocket_connect("/v1/stream/decode") as ws:
                ws.send_json({"type": "start", "model": "s3"})
                doc = ws.receive_json()
                assert doc["type"] == "error" and "token-to-audio" in doc["message"]
            with c.websocket_connect("/v1/stream/encode") as ws:
                ws.send_json({"type": "start", "model": "s3"})
                doc = ws.receive_json()
                assert doc["type"] == "error" and "not causal" in doc["message"]
            assert c.get("/healthz").json() == {"status": "ok"}
    finally:
        engine.close(timeout=5)


def test_command_line_encode_tokenize_and_reconstruct(s3_refs, s3_codec, tmp_path):
    from click.testing import CliRunner

    from audiotok.cli import main

    pt = str(s3_refs("v2_25hz").pt)
    w = reference.speech_like(24000)
    sf.write(tmp_path / "a.wav", w.numpy(), 16000, subtype="FLOAT")
    run = CliRunner().invoke
    r = run(main, ["encode", str(tmp_path / "a.wav"), "-o", str(tmp_path / "a.codes"), "-m", pt])
    assert r.exit_code == 0, r.output
    codes = audiotok.Codes.load(tmp_path / "a.codes")
    assert codes.tokens.tolist() == s3_codec.encode(w[None], 16000).tokens.tolist()
    r = run(main, ["reconstruct", str(tmp_path / "a.wav"), "-o", str(tmp_path / "r.wav"),
                   "-m", pt])
    assert r.exit_code == 1 and "token-to-audio" in r.output
    assert not (tmp_path / "r.wav").exists()
    r = run(main, ["tokenize", str(tmp_path), "-o", str(tmp_path / "tokens"), "-m", pt])
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "tokens" / "manifest.json").read_text())
    assert manifest["codec"] == "s3" and manifest["rows"] == 1 and manifest["complete"]


def test_eval_gives_token_statistics(s3_refs, tmp_path):
    """`eval` of an encode-only codec: its tokens' statistics, the precision study's token
    agreement, every audio metric skipped with the reason; the report renders beside a codec
    that decodes."""
    from audiotok.eval import evaluate
    from tests.conftest import S2_TINY

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(2):
        sf.write(corpus / f"{i}.wav", reference.speech_like(16000 * (i + 1), seed=i).numpy(),
                 16000)
    s = evaluate(corpus, [f"s3={s3_refs('v2_25hz').pt}", f"tiny={S2_TINY / 'codec.pth'}"],
                 tmp_path / "out", metrics=("snr",), progress=False, examples=1,
                 dtype="bfloat16", reference_dtype="float32")
    s3 = s["systems"]["s3"]
    assert s3["errors"] == 0 and s3["tokens"]["frames"] == 25 + 50
    assert s3["metrics"]["snr"]["skipped"] == {"the codec does not decode (encode only)": 2}
    assert 0.9 <= s3["precision"]["tokens_equal"]["mean"] <= 1
    assert s["systems"]["tiny"]["metrics"]["snr"]["count"] == 2
    assert "Tokens of s3" in (tmp_path / "out" / "report.md").read_text()
    assert (tmp_path / "out" / "report.html").exists()
