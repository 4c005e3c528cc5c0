"""The S2 codec GGUF for s2.cpp: the golden standalone file's layout, and a round trip through
audiotok's own loader (exact in f32, f16-rounded in f16) with the reference's tokens."""

import subprocess
import sys

import gguf
import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from audiotok.models.s2.gguf import export_gguf
from tests.conftest import S2_TINY, XCODEC2_TINY

GOLDEN = S2_TINY / "codec_standalone_f32.gguf"


def fields(path):
    r = gguf.GGUFReader(path)
    return r, {k: ([gguf.GGUFValueType(t).name for t in f.types], f.contents())
               for k, f in r.fields.items() if not k.startswith("GGUF.")}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, s2_codec):
    d = tmp_path_factory.mktemp("gguf")
    return {dt: export_gguf(s2_codec, d / f"codec_{dt}.gguf", dt) for dt in ("f32", "f16")}


def test_layout_equals_the_golden_standalone_file(exported):
    golden, golden_meta = fields(GOLDEN)
    for dtype, path in exported.items():
        ours, meta = fields(path)
        assert meta == golden_meta  # every key, its GGUF type and value
        assert [t.name for t in ours.tensors] == sorted(t.name for t in golden.tensors)
        want = gguf.GGMLQuantizationType.F32 if dtype == "f32" else gguf.GGMLQuantizationType.F16
        assert {t.tensor_type for t in ours.tensors} == {want}
    ours = {t.name: np.array(t.data) for t in gguf.GGUFReader(exported["f32"]).tensors}
    for t in golden.tensors:
        if not t.name.endswith("freqs_cis"):  # unused buffers: ours is the RoPE table
            # the same folded weights (the golden file was folded by s2.cpp's exporter code)
            np.testing.assert_allclose(ours[t.name], np.array(t.data), rtol=1e-6, atol=1e-9)
    rope = ours["quantizer.pre_module.freqs_cis"]
    assert rope.shape == (2048, 32, 2) and rope[0, 0, 0] == 1 and rope[1, 0, 1] == \
        torch.tensor(np.sin(1.0)).to(torch.bfloat16).item()


def test_f32_round_trip_is_exact(exported, s2_codec, s2_golden):
    back = audiotok.load(exported["f32"])
    ours, theirs = s2_codec.model.state_dict(), back.model.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    for n in (30000, 132377):
        codes = back.encode(s2_golden[f"audio_{n}"])
        assert np.array_equal(codes.tokens[0].numpy(), s2_golden[f"codes_{n}"])
        out = back.decode(s2_golden[f"codes_{n}"])[0, 0].numpy()
        np.testing.assert_allclose(out, s2_golden[f"decoded_{n}"], rtol=0, atol=1e-4)


def test_f16_round_trip_is_f16_rounded(exported, s2_codec):
    back = audiotok.load(exported["f16"])
    ours, theirs = s2_codec.model.state_dict(), back.model.state_dict()
    assert all(torch.equal(ours[k].half().float(), theirs[k]) for k in ours)
    with np.load(S2_TINY / "expected_gguf_f16.npz") as z:
        ref = {k: z[k] for k in z.files}
    for n in (132377, 352805):
        codes = back.encode(ref[f"audio_{n}"])
        assert np.array_equal(codes.tokens[0].numpy(), ref[f"codes_{n}"])
        out = back.decode(ref[f"codes_{n}"])[0, 0].numpy()
        np.testing.assert_allclose(out, ref[f"decoded_{n}"], rtol=0, atol=1e-4)


def test_from_a_merged_gguf_and_errors(tmp_path, xc_codec):
    merged = audiotok.load(S2_TINY / "codec_merged_f16.gguf")
    path = export_gguf(merged, tmp_path / "from_merged.gguf", "f32")
    again = audiotok.load(path)
    assert all(torch.equal(a, b) for a, b in zip(merged.model.state_dict().values(),
                                                 again.model.state_dict().values(), strict=True))
    with pytest.raises(AudiotokError, match="GGUF export is for the S2 codec"):
        export_gguf(xc_codec, tmp_path / "x.gguf")
    with pytest.raises(AudiotokError, match="unknown GGUF dtype 'q8'"):
        export_gguf(merged, tmp_path / "x.gguf", "q8")
    assert not (tmp_path / "x.gguf").exists()


def test_cli(tmp_path):
    out = tmp_path / "c.gguf"
    p = subprocess.run([sys.executable, "-m", "audiotok", "export", str(S2_TINY / "codec.pth"),
                        "--format", "gguf", "-o", str(out), "--dtype", "f32"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "GGUF f32, architecture fish-speech-codec" in p.stdout
    assert fields(out)[1] == fields(GOLDEN)[1]
    p = subprocess.run([sys.executable, "-m", "audiotok", "export", str(XCODEC2_TINY / "hf"),
                        "--format", "gguf", "-o", str(tmp_path / "x.gguf")],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "X-Codec2 has no gguf export (its formats: onnx); gguf export is for Fish Audio S2 " \
        "codec" in p.stderr
