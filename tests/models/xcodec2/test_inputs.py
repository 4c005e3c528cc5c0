"""X-Codec2 behind the common API: rates, channels, lengths, bad inputs, wrong checkpoints."""

import numpy as np
import pytest
import soxr
import torch

import audiotok
from audiotok.errors import AudioError, CheckpointError, CodesError
from tests.conftest import S2_TINY, XCODEC2_TINY


def test_properties(xc_codec):
    assert (xc_codec.name, xc_codec.sample_rate, xc_codec.samples_per_frame) == ("xcodec2", 16000,
                                                                                 320)
    assert xc_codec.frame_rate == 50.0 and xc_codec.codebook_sizes == (65536,)
    assert xc_codec.num_codebooks == 1
    assert xc_codec.info()["bitrate_bps"] == 800.0
    assert "CC-BY-NC-4.0" in xc_codec.info()["weights_licence"]


def test_any_rate_and_channels(xc_codec, xc_golden):
    wave = xc_golden["n49120_waveform"]
    stereo = np.stack([wave * 0.25, wave * 1.75])
    np.testing.assert_array_equal(xc_codec.encode(stereo).tokens[0].numpy(),
                                  xc_golden["n49120_codes"][0])
    at44 = soxr.resample(wave, 16000, 44100, quality="HQ").astype(np.float32)
    codes = xc_codec.encode(at44, sample_rate=44100)
    back = soxr.resample(at44, 44100, 16000, quality="HQ").astype(np.float32)
    assert codes.num_samples.tolist() == [back.size]
    assert torch.equal(codes.tokens, xc_codec.encode(back).tokens)


@pytest.mark.parametrize("n, frames", [(1, 1), (319, 1), (320, 2), (8000, 26), (8001, 26)])
def test_frame_counts(xc_codec, n, frames):
    codes = xc_codec.encode(np.full(n, 0.05, np.float32))
    assert codes.lengths.tolist() == [frames]
    assert xc_codec.decode(codes).shape == (1, 1, n)


@pytest.mark.parametrize("bad, kw, match", [
    (np.zeros(0, np.float32), {}, "empty audio"),
    (np.zeros(10, np.float32), {"sample_rate": "16k"}, "positive integer"),
    (np.zeros(10, np.float32), {"sample_rate": 16000.5}, "positive integer"),
    (np.zeros(1, np.float32), {"sample_rate": 96000}, "too short"),
    (np.full(100, np.nan, np.float32), {}, "NaN"),
])
def test_bad_audio(xc_codec, bad, kw, match):
    with pytest.raises(AudioError, match=match):
        xc_codec.encode(bad, **kw)


@pytest.mark.parametrize("token, match", [(65536, "token 65536"), (-1, "token -1")])
def test_tokens_out_of_range(xc_codec, token, match):
    tokens = np.zeros((1, 1, 5), np.int64)
    tokens[0, 0, 3] = token
    with pytest.raises(CodesError, match=match + ".*codebook 0, frame 3.*0..65535"):
        xc_codec.decode(tokens)
    assert xc_codec.decode(tokens, clamp=True).shape == (1, 1, 1600)


def test_other_codecs_checkpoints():
    s2_as_xcodec2 = "holds Fish Audio S2 codec weights, not X-Codec2 weights"
    with pytest.raises(CheckpointError, match=s2_as_xcodec2):
        audiotok.load(S2_TINY / "codec.pth", codec="xcodec2")
    xcodec2_as_s2 = "holds X-Codec2 weights, not Fish Audio S2 codec weights"
    with pytest.raises(CheckpointError, match=xcodec2_as_s2):
        audiotok.load(XCODEC2_TINY / "hf", codec="s2")
    from audiotok.models.s2.codec import S2Codec
    from audiotok.models.xcodec2.codec import XCodec2Codec

    with pytest.raises(CheckpointError, match="not an X-Codec2 checkpoint"):
        XCodec2Codec.from_checkpoint(S2_TINY / "codec.pth")
    with pytest.raises(CheckpointError):
        S2Codec.from_checkpoint(XCODEC2_TINY / "hf" / "model.safetensors")


def test_s2_codes_to_xcodec2(xc_codec, s2_codec, s2_golden):
    with pytest.raises(CodesError, match="made by the 's2' codec"):
        xc_codec.decode(s2_codec.encode(s2_golden["audio_2049"]))


def test_truncated_safetensors(tmp_path):
    data = (XCODEC2_TINY / "hf" / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    (tmp_path / "config.json").write_bytes((XCODEC2_TINY / "hf" / "config.json").read_bytes())
    with pytest.raises(CheckpointError, match="truncated"):
        audiotok.load(tmp_path)


def test_missing_config_for_transformers_layout(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(
        (XCODEC2_TINY / "hf" / "model.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match="need the config.json"):
        audiotok.load(tmp_path / "model.safetensors")


def test_misshapen_tensor_is_named(tmp_path):
    from safetensors.torch import load_file, save_file

    sd = load_file(XCODEC2_TINY / "hf" / "model.safetensors")
    sd["fc_encoder.bias"] = torch.zeros(95)
    del sd["acoustic_decoder.norm.bias"]
    save_file(sd, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_bytes((XCODEC2_TINY / "hf" / "config.json").read_bytes())
    with pytest.raises(CheckpointError) as e:
        audiotok.load(tmp_path)
    assert "missing tensor acoustic_decoder.norm.bias (expected shape [64])" in str(e.value)
    assert "fc_encoder.bias has shape [95], expected [96]" in str(e.value)
