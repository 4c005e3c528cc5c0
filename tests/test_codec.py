"""The Codec API on the tiny S2 model: inputs of every kind, lengths, errors."""

import io

import numpy as np
import pytest
import soundfile as sf
import soxr
import torch

from audiotok import Codes
from audiotok.errors import AudioError, CodesError


def test_properties(s2_codec):
    assert s2_codec.name == "s2"
    assert s2_codec.sample_rate == 44100
    assert s2_codec.samples_per_frame == 2048
    assert s2_codec.frame_rate == 44100 / 2048
    assert s2_codec.num_codebooks == 10
    assert s2_codec.codebook_sizes == (256,) + (64,) * 9
    info = s2_codec.info()
    assert info["parameters"] == sum(p.numel() for p in s2_codec.model.parameters())
    assert "Fish Audio Research License" in info["weights_licence"]


def test_path_bytes_array_and_tensor_inputs_agree(s2_codec, s2_golden, tmp_path):
    x = s2_golden["audio_30000"]
    path = tmp_path / "a.wav"
    sf.write(path, x, 44100, subtype="FLOAT")
    expected = s2_golden["codes_30000"]
    for inp in (x, torch.from_numpy(x), str(path), path, path.read_bytes(), x[None]):
        codes = s2_codec.encode(inp)
        np.testing.assert_array_equal(codes.tokens[0].numpy(), expected)
        assert codes.num_samples.tolist() == [30000]


def test_stereo_is_downmixed_and_other_rates_resampled(s2_codec, s2_golden):
    x = s2_golden["audio_30000"]
    stereo = np.stack([x * 0.5, x * 1.5])
    np.testing.assert_array_equal(s2_codec.encode(stereo).tokens[0].numpy(),
                                  s2_golden["codes_30000"])
    low = soxr.resample(x, 44100, 16000, quality="HQ").astype(np.float32)
    codes = s2_codec.encode(low, sample_rate=16000)
    up = soxr.resample(low, 16000, 44100, quality="HQ").astype(np.float32)
    assert codes.num_samples.tolist() == [up.size]
    assert torch.equal(codes.tokens, s2_codec.encode(up).tokens)
    assert codes.meta["source_sample_rate"] == [16000]


def test_list_of_mixed_items(s2_codec, s2_golden, tmp_path):
    path = tmp_path / "b.flac"
    sf.write(path, s2_golden["audio_2049"], 44100, subtype="PCM_24")
    pcm16 = (s2_golden["audio_30000"] * 20000).astype(np.int16)
    codes = s2_codec.encode([s2_golden["audio_132377"], str(path), pcm16, np.stack([pcm16] * 2)])
    assert codes.lengths.tolist() == [65, 2, 15, 15]
    np.testing.assert_array_equal(codes.tokens[0].numpy(), s2_golden["codes_132377"])
    assert torch.equal(codes.tokens[2], codes.tokens[3])  # same signal, mono vs stereo
    assert torch.equal(codes[2].tokens, s2_codec.encode(pcm16).tokens)


def test_lengths(s2_codec):
    for n, frames in [(1, 1), (2047, 1), (2048, 1), (2049, 2), (4096, 2), (5000, 3)]:
        codes = s2_codec.encode(np.full(n, 0.1, np.float32))
        assert codes.lengths.tolist() == [frames]
        assert s2_codec.decode(codes).shape == (1, 1, n)  # trimmed to the input length
        assert s2_codec.decode(codes.tokens).shape == (1, 1, frames * 2048)


@pytest.mark.parametrize("bad, match", [
    (np.zeros(0, np.float32), "empty audio"),
    (np.zeros((2, 0), np.float32), "empty audio"),
    (np.array([0.1, np.nan, 0.2], np.float32), "NaN or Inf \\(first at sample 1\\)"),
    (np.array([0.1, 0.2, np.inf], np.float32), "NaN or Inf \\(first at sample 2\\)"),
    (np.zeros((1, 1, 2, 100), np.float32), "4-D shape \\(1, 1, 2, 100\\)"),
    (np.zeros((), np.float32), "0-D"),
    (np.zeros((44100, 2), np.float32), "channels-last"),
    (np.array(["a"]), "dtype <U1"),
    ({"audio": 1}, "unsupported audio input of type dict"),
    ([], "empty list"),
    ([np.zeros((2, 1, 10), np.float32)], "3-D batch"),
])
def test_bad_audio(s2_codec, bad, match):
    with pytest.raises(AudioError, match=match):
        s2_codec.encode(bad)


@pytest.mark.parametrize("rate", ["44100", 0, -5, 44100.5, True, None.__class__])
def test_bad_sample_rate(s2_codec, rate):
    with pytest.raises(AudioError, match="sample_rate must be a positive integer"):
        s2_codec.encode(np.zeros(100, np.float32), sample_rate=rate)


def test_too_short_after_resampling(s2_codec):
    with pytest.raises(AudioError, match="too short"):
        s2_codec.encode(np.zeros(1, np.float32), sample_rate=96000)


def test_unreadable_and_truncated_files(s2_codec, tmp_path, s2_golden):
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF....not audio")
    with pytest.raises(AudioError, match="junk.wav: cannot read audio"):
        s2_codec.encode(junk)
    with pytest.raises(AudioError, match="no such audio file"):
        s2_codec.encode(tmp_path / "missing.wav")
    good = io.BytesIO()
    sf.write(good, s2_golden["audio_30000"], 44100, format="WAV", subtype="PCM_16")
    trunc = tmp_path / "trunc.wav"
    trunc.write_bytes(good.getvalue()[:20000])
    with pytest.raises(AudioError, match="trunc.wav: truncated audio file"):
        s2_codec.encode(trunc)
    path = tmp_path / "r.wav"
    sf.write(path, s2_golden["audio_30000"], 44100)
    with pytest.raises(AudioError, match="sample_rate=16000 was given"):
        s2_codec.encode(path, sample_rate=16000)


def test_out_of_range_tokens(s2_codec, s2_golden):
    codes = s2_golden["codes_30000"].copy()
    codes[3, 5] = 64
    message = "token 64 at item 0, codebook 3, frame 5 is outside 0..63"
    with pytest.raises(CodesError, match=message):
        s2_codec.decode(codes)
    codes[3, 5] = 5
    codes[0, 2] = -1
    with pytest.raises(CodesError, match="token -1 at item 0, codebook 0, frame 2"):
        s2_codec.decode(codes)


def test_clamp_matches_clamped_tokens_and_leaves_input_alone(s2_codec, s2_golden):
    codes = s2_golden["codes_30000"].copy()
    codes[0, 1], codes[4, 7] = 9999, -3
    original = codes.copy()
    audio = s2_codec.decode(codes, clamp=True)
    np.testing.assert_array_equal(codes, original)
    fixed = original.copy()
    fixed[0, 1], fixed[4, 7] = 255, 0
    assert torch.equal(audio, s2_codec.decode(fixed))


@pytest.mark.parametrize("bad, match", [
    (np.zeros((9, 4), np.int64), "9 codebooks"),
    (np.zeros((10, 0), np.int64), "no frames"),
    (np.zeros((1, 1, 10, 4), np.int64), "\\[B, K, T\\] or \\[K, T\\]"),
    (np.zeros((10, 4), np.float32), "integers"),
    ("tokens", "integers|integer array"),
])
def test_bad_tokens(s2_codec, bad, match):
    with pytest.raises(CodesError, match=match):
        s2_codec.decode(bad)


def test_codes_of_another_codec(s2_codec):
    codes = Codes(tokens=torch.zeros(1, 10, 3, dtype=torch.long), lengths=torch.tensor([3]),
                  codec="xcodec2")
    with pytest.raises(CodesError, match="made by the 'xcodec2' codec"):
        s2_codec.decode(codes)


def test_licence_announced_once(capsys):
    import audiotok
    from audiotok import codec as codec_module
    from tests.conftest import S2_TINY

    codec_module._ANNOUNCED.clear()
    audiotok.load(S2_TINY / "codec.pth")
    audiotok.load(S2_TINY / "codec.pth")
    err = capsys.readouterr().err
    assert err.count("Fish Audio Research License") == 1
