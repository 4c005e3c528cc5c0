"""The codec contract (docs/adding-a-codec.md): every registered family keeps it, nothing outside
models/ names a family, and a family the library has never seen (tests/models/toy, registered
here only) works everywhere from its folder alone."""

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import audiotok
from audiotok.chunking import frames_for
from audiotok.cli import main
from audiotok.codec import Codec
from audiotok.errors import AudiotokError, CheckpointError
from audiotok.models import registry
from audiotok.streaming.spec import WINDOWS, StreamSpec
from tests.bounds import ROUNDING
from tests.conftest import S2_TINY, XCODEC2_TINY
from tests.models.toy import FAMILY as TOY
from tests.models.toy.codec import MU

SRC = Path(audiotok.__file__).parent


@pytest.mark.parametrize("family", list(registry.FAMILIES.values()), ids=lambda f: f.name)
def test_every_family_keeps_the_contract(family):
    cls = family.codec_class()
    assert issubclass(cls, Codec) and cls.family is family
    assert frames_for(cls.frame_rule, 1, 640) >= 0  # a known rule
    assert family.licence and family.title and family.presets
    assert all(registry.PRESETS[p.name].family == family.name for p in family.presets)
    if family.onnx:
        assert callable(family.resolve(family.onnx))
    for exporter in family.exporters.values():
        assert callable(family.resolve(exporter.function)) and exporter.dtypes
    for name, ref in family.llm_schemes.items():
        scheme = family.resolve(ref)
        assert scheme.name == name and scheme.summary and callable(scheme.for_codec)
    spec = cls.streaming  # one typed spec: what streams, each direction
    assert isinstance(spec, StreamSpec)
    assert spec.decode is not None or spec.window is None
    if spec.decode == WINDOWS or spec.window is not None:
        assert spec.window.chunk is None or spec.window.chunk >= 1


def test_detection():
    assert registry.detect_family(S2_TINY / "codec.pth").name == "s2"
    assert registry.detect_family(S2_TINY / "codec_merged_f16.gguf").name == "s2"
    assert registry.detect_family(S2_TINY).name == "s2"  # a folder holding codec.pth
    assert registry.detect_family(XCODEC2_TINY / "hf").name == "xcodec2"
    assert registry.detect_family(XCODEC2_TINY / "original" / "model.safetensors").name == \
        "xcodec2"


def test_undetectable_checkpoints_get_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"\0" * 64)
    for path in (tmp_path / "empty", tmp_path / "weights.bin"):
        with pytest.raises(CheckpointError, match="cannot tell which codec .* pass codec="):
            audiotok.load(path)


def _string_literals(tree) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


def test_nothing_outside_models_names_a_family():
    names = [f.name for f in registry.FAMILIES.values()]
    titles = [f.title for f in registry.FAMILIES.values()]
    presets = list(registry.PRESETS)
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "models":
            continue
        text = path.read_text()
        tree = ast.parse(text)
        for s in _string_literals(tree):
            if s in names or s in presets:
                found.append(f"{rel}: string {s!r}")
            found += [f"{rel}: {t!r} in {s[:40]!r}" for t in titles if t in s]
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and \
                    re.search(r"(^|\.)models\.(?!family$|registry$)", n.module):
                found.append(f"{rel}: imports {n.module}")
        if re.search(r"\b(S2|X-Codec2|xcodec2|Mimi|mimi|moshi|Moshi)\b", text):
            found.append(f"{rel}: names a codec in a comment or docstring")
    assert not found, found


# -- a family the library has never seen -------------------------------------------------------

@pytest.fixture
def toy(monkeypatch, tmp_path):
    """The toy family registered, and a checkpoint folder of it."""
    monkeypatch.setitem(registry.FAMILIES, TOY.name, TOY)
    for preset in TOY.presets:
        monkeypatch.setitem(registry.PRESETS, preset.name, registry.Preset(
            preset.name, preset.repo_id, preset.files, TOY.name))
    folder = tmp_path / "toy_ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mulaw-toy", "hop": 4}))
    return folder


def mulaw(x: np.ndarray) -> np.ndarray:
    """The toy's tokens by numpy: each 4-sample frame's mean, mu-law companded to 0..255."""
    pad = -x.size % 4
    frames = np.pad(x, (0, pad)).reshape(-1, 4).mean(1).clip(-1, 1)
    y = np.sign(frames) * np.log1p(MU * np.abs(frames)) / np.log1p(MU)
    return np.round((y + 1) / 2 * 255).astype(np.int64)


def test_a_new_family_works_from_its_folder_alone(toy, tmp_path, capsys):
    codec = audiotok.load(toy)
    assert type(codec).__name__ == "MuLawCodec" and codec.name == "mulaw"
    assert "toy licence" in capsys.readouterr().err
    x = np.sin(np.arange(1001) / 7).astype(np.float32) * 0.5
    codes = codec.encode(x)
    assert codes.tokens.shape == (1, 1, 251) and codes.lengths.tolist() == [251]
    np.testing.assert_array_equal(codes.tokens[0, 0].numpy(), mulaw(x))
    audio = codec.decode(codes)
    assert audio.shape == (1, 1, 1001)
    # a batch of two lengths gives each item its own tokens
    batch = codec.encode([x, x[:37]])
    assert batch.lengths.tolist() == [251, 10]
    np.testing.assert_array_equal(batch.tokens[1, 0, :10].numpy(), mulaw(x[:37]))
    # Codes files and save_pretrained: the codec id travels with them
    codes.save(tmp_path / "x.codes")
    back = audiotok.Codes.load(tmp_path / "x.codes")
    assert back.codec == "mulaw" and torch.equal(back.tokens, codes.tokens)
    codec.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["codec"] == "mulaw"
    assert type(audiotok.load(tmp_path / "saved")).__name__ == "MuLawCodec"
    with pytest.raises(CheckpointError, match="holds Toy mu-law codec weights, not X-Codec2"):
        audiotok.load(toy, codec="xcodec2")
    # streaming (causal) equals offline
    with codec.stream_decoder() as dec:
        pcm = torch.cat([dec.push(codes.tokens[:, :, i: i + 7]) for i in range(0, 251, 7)], -1)
    torch.testing.assert_close(pcm[..., :1001], audio, rtol=0, atol=ROUNDING)
    with codec.stream_encoder() as enc:
        t = [enc.push(torch.from_numpy(x[None, i: i + 50])) for i in range(0, 1001, 50)]
        t.append(enc.flush())
    assert torch.equal(torch.cat(t, -1), codes.tokens)
    # ONNX: the family has no hook, and says so
    from audiotok.export import export_as, export_onnx

    with pytest.raises(AudiotokError, match="ONNX export of Toy mu-law codec is not available"):
        export_onnx(codec, tmp_path / "onnx")
    with pytest.raises(AudiotokError, match="no gguf export .* gguf export is for Fish Audio"):
        export_as(codec, "gguf", tmp_path / "x.gguf")


def test_a_new_family_in_the_engine_and_the_command_line(toy, tmp_path):
    from audiotok.server import Engine, EngineSettings

    codec = audiotok.load(toy)
    x = np.cos(np.arange(803) / 5).astype(np.float32) * 0.3
    want = mulaw(x)
    with Engine({"toy": codec}, EngineSettings(max_streams=2)) as engine:
        np.testing.assert_array_equal(engine.encode("toy", x).result()[0], want)
        audio = engine.decode("toy", want[None]).result()
        np.testing.assert_allclose(audio, codec.decode(want[None, None])[0, 0].numpy(),
                                   rtol=0, atol=ROUNDING)
        with engine.open_decode_stream("toy") as s:
            for i in range(0, want.size, 9):
                s.push(want[None, i: i + 9])
            s.finish()
            streamed = np.concatenate(list(s))
        np.testing.assert_allclose(streamed, audio, rtol=0, atol=ROUNDING)
    r = CliRunner().invoke(main, ["info", "--codecs", "--json"])
    assert r.exit_code == 0, r.output
    facts = json.loads(r.output[r.output.index("{"):])["codec mulaw"]
    assert facts["names"] == ["mulaw-toy"] and facts["causal"] is True
    wav = tmp_path / "x.wav"
    import soundfile as sf

    sf.write(wav, x, 8000, subtype="FLOAT")
    r = CliRunner().invoke(main, ["encode", str(wav), "-o", str(tmp_path / "x.npy"),
                                  "-m", str(toy)])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy")[0], want)
    r = CliRunner().invoke(main, ["decode", str(tmp_path / "x.npy"), "-o",
                                  str(tmp_path / "y.wav"), "-m", str(toy), "--subtype", "FLOAT"])
    assert r.exit_code == 0, r.output
    y, rate = sf.read(tmp_path / "y.wav", dtype="float32")
    assert rate == 8000 and y.shape == (804,)
    np.testing.assert_allclose(y, codec.decode(want[None, None])[0, 0].numpy(), atol=1e-7)
