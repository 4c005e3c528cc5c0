"""Every checkpoint format loads to the same canonical tensors; every mismatch is named."""

import json

import gguf
import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import CheckpointError
from audiotok.models.s2.config import S2_PRO, S2Config
from audiotok.models.s2.weights import infer_config, load_checkpoint, read_gguf, to_fish_speech
from tests.conftest import S2_TINY
from tests.helpers import respell_weight_norm, s2_gguf_metadata, write_gguf

TINY_CFG = S2Config.from_dict(json.loads((S2_TINY / "config.json").read_text()))


def _canonical():
    sd, cfg = load_checkpoint(S2_TINY / "codec.pth")
    return sd, cfg


def test_golden_config_and_pth_agree():
    sd, cfg = _canonical()
    assert cfg == TINY_CFG
    assert cfg.samples_per_frame == 2048 and cfg.num_codebooks == 10
    assert cfg.codebook_sizes == (256,) + (64,) * 9
    assert len(sd) == 329  # folded tensors, no stale buffers
    assert not any("freqs_cis" in k or "causal_mask" in k or "weight_g" in k or "original0" in k
                   for k in sd)


def test_shapes_infer_the_config_except_windows():
    sd, _ = _canonical()
    inferred = infer_config(sd, "test")
    # windows, head size, rope base and eps come from S2 Pro; everything else from shapes
    assert inferred.rvq_transformer.window_size == S2_PRO.rvq_transformer.window_size
    assert inferred == S2Config(**{**TINY_CFG.__dict__, "rvq_transformer": type(
        TINY_CFG.rvq_transformer)(**{**TINY_CFG.rvq_transformer.__dict__, "window_size": 128})})


def test_s2_pro_preset_parameter_count():
    from audiotok.models.s2.model import S2Model

    with torch.device("meta"):  # shapes only: no 391 M random numbers
        model_sd = S2Model(S2_PRO).state_dict()
    assert len(model_sd) == 455
    assert sum(v.numel() for v in model_sd.values()) == 391_398_385  # spec 10.1, folded


def test_fish_speech_layout_is_the_released_one():
    sd, _ = _canonical()
    original = torch.load(S2_TINY / "codec.pth", weights_only=True)
    exported = to_fish_speech(sd)
    assert set(exported) == {k for k in original if not k.endswith(("freqs_cis", "causal_mask"))}
    assert all(exported[k].shape == original[k].shape for k in exported)


@pytest.mark.parametrize("spelling", ["legacy", "parametrizations"])
def test_weight_norm_spellings_and_folded(tmp_path, spelling):
    sd, _ = _canonical()
    variant = respell_weight_norm(torch.load(S2_TINY / "codec.pth", weights_only=True), spelling)
    other = "original0" if spelling == "legacy" else "weight_g"
    assert not any(other in k for k in variant) and len(variant) == len(sd) + 80 + 6
    torch.save(variant, tmp_path / "codec.pth")
    (tmp_path / "config.json").write_text((S2_TINY / "config.json").read_text())
    got, _ = load_checkpoint(tmp_path / "codec.pth")
    assert got.keys() == sd.keys()
    for k in sd:
        assert torch.allclose(got[k], sd[k], rtol=1e-6, atol=1e-7), k
    torch.save(sd, tmp_path / "folded.pth")
    folded, _ = load_checkpoint(tmp_path / "folded.pth")
    assert all(torch.equal(folded[k], sd[k]) for k in sd)


def test_save_pretrained_roundtrip(tmp_path, s2_codec, s2_golden):
    s2_codec.save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["codec"] == "s2" and config["rvq_transformer"]["window_size"] == 16
    again = audiotok.load(tmp_path / "m")
    assert again.config == s2_codec.config
    for k, v in s2_codec.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[k], v), k
    codes = again.encode(s2_golden["audio_352805"])
    np.testing.assert_array_equal(codes.tokens[0].numpy(), s2_golden["codes_352805"])


def test_gguf_files_hold_the_same_weights():
    sd, cfg = _canonical()
    f32, cfg32 = read_gguf(S2_TINY / "codec_standalone_f32.gguf")
    f16, cfg16 = read_gguf(S2_TINY / "codec_merged_f16.gguf")
    assert cfg32 == cfg16 == cfg
    assert f32.keys() == f16.keys() == sd.keys()  # AR tensors and freqs_cis skipped
    for k in sd:
        assert f16[k].dtype == torch.float16 and f32[k].dtype == torch.float32
        assert torch.allclose(f32[k], sd[k], atol=1e-6), k
        assert torch.allclose(f16[k].float(), sd[k], rtol=2e-3, atol=1e-4), k


def test_merged_gguf_never_reads_language_model_tensors(monkeypatch):
    touched = []
    original = gguf.GGUFReader.__init__

    def spy(self, *a, **kw):
        original(self, *a, **kw)
        for i, t in enumerate(self.tensors):
            if not t.name.startswith("c."):
                self.tensors[i] = t._replace(data=_Poison(t.name, touched))

    monkeypatch.setattr(gguf.GGUFReader, "__init__", spy)
    sd, _ = read_gguf(S2_TINY / "codec_merged_f16.gguf")
    assert touched == [] and len(sd) == 329


class _Poison:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __array__(self, *a, **kw):
        self.log.append(self.name)
        raise AssertionError(f"read {self.name}")


def _tiny_gguf(tmp_path, drop=None, retype=None, arch="fish-speech-codec", **replace):
    sd, cfg = _canonical()
    meta = s2_gguf_metadata(cfg)
    if drop:
        del meta[drop]
    if retype:
        key, kind = retype
        meta[key] = (kind, meta[key][1] if kind != "str" else "x")
    for k, v in replace.items():
        sd[k] = v
    path = tmp_path / "codec.gguf"
    write_gguf(path, arch, meta, sd)
    return path


def test_written_gguf_loads(tmp_path, s2_golden):
    codec = audiotok.load(_tiny_gguf(tmp_path))
    codes = codec.encode(s2_golden["audio_132377"])
    np.testing.assert_array_equal(codes.tokens[0].numpy(), s2_golden["codes_132377"])


def test_gguf_missing_key_is_named(tmp_path):
    key = "fish_speech.codec.rvq_transformer.window_size"
    with pytest.raises(CheckpointError, match=f"{key} is missing"):
        audiotok.load(_tiny_gguf(tmp_path, drop=key))


def test_gguf_wrong_key_type_is_named(tmp_path):
    key = "fish_speech.codec.latent_dim"
    with pytest.raises(CheckpointError, match=f"{key} has type STRING, expected UINT32"):
        audiotok.load(_tiny_gguf(tmp_path, retype=(key, "str")))


def test_gguf_other_architecture(tmp_path):
    with pytest.raises(CheckpointError, match="architecture 'llama'"):
        audiotok.load(_tiny_gguf(tmp_path, arch="llama"))


def test_wrong_shape_names_tensor_and_both_shapes(tmp_path):
    key = "decoder.model.0.conv.bias"
    path = _tiny_gguf(tmp_path, **{key: torch.zeros(95)})
    with pytest.raises(CheckpointError, match=rf"{key} has shape \[95\], expected \[96\]"):
        audiotok.load(path)


def test_missing_and_unexpected_tensors(tmp_path):
    sd, _ = _canonical()
    del sd["encoder.block.5.alpha"]
    sd["encoder.extra.weight"] = torch.zeros(2)
    torch.save(sd, tmp_path / "codec.pth")
    (tmp_path / "config.json").write_text((S2_TINY / "config.json").read_text())
    with pytest.raises(CheckpointError) as e:
        audiotok.load(tmp_path / "codec.pth")
    assert "missing tensor encoder.block.5.alpha (expected shape [1, 128, 1])" in str(e.value)
    assert "unexpected tensor encoder.extra.weight (shape [2])" in str(e.value)


def test_wrong_dtype(tmp_path):
    sd, _ = _canonical()
    sd["encoder.block.5.alpha"] = torch.ones(1, 128, 1, dtype=torch.int32)
    torch.save(sd, tmp_path / "codec.pth")
    (tmp_path / "config.json").write_text((S2_TINY / "config.json").read_text())
    with pytest.raises(CheckpointError, match="encoder.block.5.alpha has dtype torch.int32"):
        audiotok.load(tmp_path / "codec.pth")


@pytest.mark.parametrize("name", ["codec.pth", "codec_standalone_f32.gguf"])
def test_truncated_checkpoint(tmp_path, name):
    data = (S2_TINY / name).read_bytes()
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        audiotok.load(path)


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "codec.pth"
    path.write_bytes(b"hello")
    with pytest.raises(CheckpointError, match=str(path)):
        audiotok.load(path)


def test_config_override(tmp_path, s2_golden):
    """A bare .pth (no config beside it) takes S2 Pro's windows; `config=` sets the real ones."""
    (tmp_path / "codec.pth").write_bytes((S2_TINY / "codec.pth").read_bytes())
    bare = audiotok.load(tmp_path / "codec.pth")
    assert bare.config.rvq_transformer.window_size == 128
    fixed = audiotok.load(tmp_path / "codec.pth", config=TINY_CFG)
    codes = fixed.encode(s2_golden["audio_352805"])
    np.testing.assert_array_equal(codes.tokens[0].numpy(), s2_golden["codes_352805"])
