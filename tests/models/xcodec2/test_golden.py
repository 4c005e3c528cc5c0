"""Parity with transformers' Xcodec2Model and the original xcodec2 package on the tiny golden
checkpoints (tests/data/xcodec2_tiny)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

import audiotok
from audiotok.models.xcodec2.features import semantic_features
from audiotok.models.xcodec2.weights import load_checkpoint
from audiotok.streaming.spec import Window
from tests.conftest import XCODEC2_CASES, XCODEC2_TINY

AUDIO_TOL = 1e-4


def padded(wave: np.ndarray) -> torch.Tensor:
    n = wave.size
    return torch.nn.functional.pad(torch.from_numpy(wave), (0, 320 - n % 320))


@pytest.mark.parametrize("case", XCODEC2_CASES)
def test_features_match_original_extractor(xc_golden, case):
    audio = padded(xc_golden[f"{case}_waveform"])
    feats, mask = semantic_features(audio[None], torch.tensor([audio.numel()]), 320, 16000)
    assert feats.shape == xc_golden[f"{case}_features"].shape and bool(mask.all())
    want = xc_golden[f"{case}_features"]  # (log-mel features, up to about 10: a relative bound)
    assert np.abs(feats.numpy() - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("case", XCODEC2_CASES)
def test_encode_matches_reference(xc_codec, xc_golden, case):
    wave = xc_golden[f"{case}_waveform"]
    codes = xc_codec.encode(wave)
    expected = xc_golden[f"{case}_codes"][0]
    assert codes.lengths.tolist() == [wave.size // 320 + 1]
    np.testing.assert_array_equal(codes.tokens[0].numpy(), expected)


@pytest.mark.parametrize("case", XCODEC2_CASES)
def test_fsq_input(xc_codec, xc_golden, case):
    """project_in output before rounding: tells a real bug from a rounding-boundary flip."""
    model = xc_codec.model
    audio = padded(xc_golden[f"{case}_waveform"])[None, None]
    captured = {}
    hook = model.quantizer.project_in.register_forward_hook(
        lambda m, i, o: captured.setdefault("z", o))
    with torch.inference_mode():
        model.encode(audio)
    hook.remove()
    assert np.abs(captured["z"][0].numpy() - xc_golden[f"{case}_fsq_input"]).max() <= 1e-4


@pytest.mark.parametrize("case", XCODEC2_CASES)
def test_decode_matches_reference(xc_codec, xc_golden, case):
    audio = xc_codec.decode(xc_golden[f"{case}_codes"][0])
    assert audio.shape == xc_golden[f"{case}_audio"].shape
    assert np.abs(audio.numpy() - xc_golden[f"{case}_audio"]).max() <= AUDIO_TOL
    assert np.abs(audio.numpy() - xc_golden[f"{case}_audio_orig"]).max() <= AUDIO_TOL


def test_decode_trims_to_input_length(xc_codec, xc_golden):
    codes = xc_codec.encode(xc_golden["n8001_waveform"])
    assert xc_codec.decode(codes).shape == (1, 1, 8001)
    assert xc_codec.decode(codes.tokens).shape == (1, 1, 26 * 320)


def test_random_codes(xc_codec, xc_golden):
    audio = xc_codec.decode(xc_golden["random_codes"])
    assert np.abs(audio.numpy() - xc_golden["random_codes_audio"]).max() <= AUDIO_TOL
    assert np.abs(audio.numpy() - xc_golden["random_codes_audio_orig"]).max() <= AUDIO_TOL


def test_padded_batch_equals_single_items(xc_codec, xc_golden):
    lengths = xc_golden["batch_lengths"].tolist()
    items = [xc_golden["batch_waveforms"][i, 0, :n] for i, n in enumerate(lengths)]
    codes = xc_codec.encode(items)
    assert codes.lengths.tolist() == [105, 66, 40]
    for i, n in enumerate(codes.lengths.tolist()):
        solo = xc_golden[f"batch_item{i}_codes_solo"][0]
        np.testing.assert_array_equal(codes.tokens[i, :, :n].numpy(), solo)
    audio = xc_codec.decode(codes)
    assert audio.shape == (3, 1, max(lengths))
    for i, n in enumerate(lengths):
        alone = xc_codec.decode(codes[i])
        assert alone.shape == (1, 1, n)
        assert (audio[i, :, :n] - alone[0]).abs().max() <= AUDIO_TOL
        assert (audio[i, :, n:] == 0).all()


def test_reference_batch_decode_is_not_what_we_do(xc_codec, xc_golden):
    """The reference decoder has no mask, so padding changes its batched output; ours does not."""
    a = torch.from_numpy(xc_golden["random_codes"][:1, :, :40])
    b = torch.from_numpy(xc_golden["random_codes"][1:, :, :25])
    batch = torch.zeros(2, 1, 40, dtype=torch.long)
    batch[0], batch[1, :, :25] = a[0], b[0]
    codes = audiotok.Codes(tokens=batch, lengths=torch.tensor([40, 25]), codec="xcodec2")
    audio = xc_codec.decode(codes)
    assert (audio[1, :, : 25 * 320] - xc_codec.decode(b)[0]).abs().max() <= AUDIO_TOL
    assert (audio[0] - xc_codec.decode(a)[0]).abs().max() <= AUDIO_TOL


def test_layouts_and_spellings_load_to_the_same_tensors():
    hf, cfg_hf = load_checkpoint(XCODEC2_TINY / "hf" / "model.safetensors")
    orig, cfg_orig = load_checkpoint(XCODEC2_TINY / "original" / "model.safetensors")
    param, cfg_param = load_checkpoint(
        XCODEC2_TINY / "original" / "model_parametrizations.safetensors")
    assert cfg_hf == cfg_orig == cfg_param
    assert hf.keys() == orig.keys() == param.keys()
    assert "semantic_encoder.masked_spec_embed" not in hf
    assert not any(".layers.16." in k for k in orig)  # layer 16 of 17 is never read
    for k in hf:
        assert torch.equal(orig[k], param[k]), k
        if k.startswith("acoustic_encoder.") and k.endswith(".weight"):
            # weight-norm fold rounding: a few ulps of each value, whatever the CPU's norm
            assert torch.allclose(orig[k], hf[k], rtol=1e-6, atol=1e-9), k
        else:
            assert torch.equal(orig[k], hf[k]), k


@pytest.mark.parametrize("layout", ["original/model.safetensors",
                                    "original/model_parametrizations.safetensors"])
def test_original_layout_codes(xc_golden, layout):
    codec = audiotok.load(XCODEC2_TINY / layout)
    codes = codec.encode(xc_golden["n144000_waveform"])
    np.testing.assert_array_equal(codes.tokens[0].numpy(), xc_golden["n144000_codes"][0])


def test_save_pretrained_roundtrip(tmp_path, xc_codec, xc_golden):
    xc_codec.save_pretrained(tmp_path / "m")
    again = audiotok.load(tmp_path / "m")
    assert again.name == "xcodec2" and again.config == xc_codec.config
    for k, v in xc_codec.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[k], v), k
    codes = again.encode(xc_golden["n49120_waveform"])
    np.testing.assert_array_equal(codes.tokens[0].numpy(), xc_golden["n49120_codes"][0])


def test_windowed_long_path(xc_codec, xc_golden):
    """Long inputs run in windows with context; with context covering the whole input the
    windows see exactly what the whole pass sees."""
    wave, codes = xc_golden["n49120_waveform"], xc_golden["n49120_codes"][0]
    saved = xc_codec.streaming
    try:
        xc_codec.streaming = replace(saved, long_window=Window(200, 40, 200))
        got = xc_codec.encode(wave)
        np.testing.assert_array_equal(got.tokens[0].numpy(), codes)
        audio = xc_codec.decode(codes)
        assert np.abs(audio.numpy() - xc_golden["n49120_audio"]).max() <= AUDIO_TOL
        xc_codec.streaming = replace(saved, long_window=Window(8, 40, 8))
        short = xc_codec.encode(wave)
        assert short.tokens.shape == (1, 1, 154) and short.lengths.tolist() == [154]
        assert xc_codec.decode(short).shape == (1, 1, 49120)
    finally:
        xc_codec.streaming = saved


def test_fbank_in_blocks_equals_one_block(xc_golden):
    from audiotok.models.xcodec2.features import log_mel

    audio = padded(xc_golden["n144000_waveform"])[None]
    assert torch.equal(log_mel(audio, 16000, block=7), log_mel(audio, 16000, block=10**6))
