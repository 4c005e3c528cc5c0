"""Each metric on signals whose answer is known, and against independent implementations."""

import math
import sys

import numpy as np
import pytest

from audiotok.audio import read_audio, resample
from audiotok.eval import metrics as M
from audiotok.eval.metrics import MetricError, measure
from tests.pipeline.conftest import SPEECH


@pytest.fixture(scope="module")
def speech16():
    x, rate = read_audio(SPEECH)
    return resample(x[0], rate, 16000)


def noise_at(ref: np.ndarray, snr_db: float, seed: int = 0) -> np.ndarray:
    """ref + white noise scaled to exactly `snr_db` below the signal's energy."""
    n = np.random.default_rng(seed).standard_normal(len(ref))
    n *= math.sqrt(np.sum(ref.astype(np.float64) ** 2) / np.sum(n ** 2) / 10 ** (snr_db / 10))
    return ref + n


def test_identical_signals(speech16):
    values, skipped = measure(speech16, 16000, speech16, 16000)
    limit = 10 * math.log10((np.sum(speech16.astype(np.float64) ** 2) + M.EPS) / M.EPS)
    assert values["snr"] == pytest.approx(limit, abs=1e-9)  # the numerical limit, ~180 dB
    assert values["si_sdr"] > limit - 1 and values["si_sdr"] > 150
    assert values["mel_distance"] == 0 and values["stft_distance"] == 0
    assert values["pesq_wb"] == pytest.approx(4.644, abs=1e-3)  # P.862.2's maximum
    assert values["pesq_nb"] == pytest.approx(4.549, abs=1e-3)  # P.862.1's maximum
    assert values["stoi"] == pytest.approx(1.0, abs=1e-6)
    assert values["estoi"] == pytest.approx(1.0, abs=1e-6)
    assert values["visqol"] > 4.4
    assert 1 <= values["dnsmos_ovrl"] <= 5
    assert skipped == {}


@pytest.mark.parametrize("snr_db", [10.0, 20.0])
def test_white_noise(speech16, snr_db):
    noisy = noise_at(speech16, snr_db)
    values, _ = measure(speech16, 16000, noisy, 16000, ["snr", "si_sdr", "pesq_wb", "stoi"])
    assert values["snr"] == pytest.approx(snr_db, abs=0.1)
    assert values["si_sdr"] == pytest.approx(snr_db, abs=0.1)
    assert values["pesq_wb"] < 3.5 and values["stoi"] < 1.0


def test_gain_and_delay(speech16):
    half = speech16 * 0.5
    values, _ = measure(speech16, 16000, half, 16000, ["snr", "si_sdr", "pesq_wb"])
    assert values["si_sdr"] > 100  # gain-invariant by definition
    assert values["snr"] == pytest.approx(20 * math.log10(2), abs=1e-6)  # |s| / |s - s/2|
    assert values["pesq_wb"] > 4.5  # PESQ equalises level
    delayed = np.concatenate([np.zeros(160, np.float32), speech16[:-160]])  # 10 ms
    values, _ = measure(speech16, 16000, delayed, 16000, ["snr", "si_sdr", "pesq_wb"])
    assert values["si_sdr"] < 5 and values["snr"] < 5  # neither aligns time
    assert values["pesq_wb"] > 4.0  # PESQ finds the delay (4.25 here; 4.64 undelayed)


def test_mel_distance_of_a_gain_is_known():
    """With no bin under the clamp, a gain g moves every log10 mel value by log10(g): the
    distance is 7 scales x |log10 g|. (Loud noise: the slaney-normalised filters of the small
    windows give quiet noise mel values under 1e-5, which the clamp holds.)"""
    x = 100 * np.random.default_rng(1).standard_normal(44100)
    assert M.mel_distance(x, 0.5 * x) == pytest.approx(7 * math.log10(2), rel=1e-9)
    # the STFT distance: two scales of |log10 g^2| plus the mean magnitude difference
    mags = sum(M._stft_mag(M.torch.from_numpy(x), w).mean().item() * 0.5
               for w in M.STFT_WINDOWS)
    assert M.stft_distance(x, 0.5 * x) == pytest.approx(2 * 2 * math.log10(2) + mags, rel=1e-9)


def test_mel_and_stft_distance_match_librosa(speech16):
    """The same definitions computed by librosa (its STFT and mel filters), independently."""
    librosa = pytest.importorskip("librosa")
    x, rate = read_audio(SPEECH)
    ref = resample(x[0], rate, 44100).astype(np.float64)
    deg = resample(resample(ref, 44100, 8000), 8000, 44100).astype(np.float64)
    deg += 0.01 * np.random.default_rng(2).standard_normal(len(deg))
    mel = 0.0
    for n_mels, w in M.MEL_SCALES:
        def logmel(s, n_mels=n_mels, w=w):
            m = librosa.feature.melspectrogram(y=s, sr=44100, n_fft=w, hop_length=w // 4,
                                               window="hann", center=True, pad_mode="reflect",
                                               power=1.0, n_mels=n_mels, fmin=0.0, fmax=22050)
            return np.log10(np.maximum(m, 1e-5))
        mel += np.abs(logmel(ref) - logmel(deg)).mean()
    assert M.mel_distance(ref, deg) == pytest.approx(mel, rel=1e-6)
    stft = 0.0
    for w in M.STFT_WINDOWS:
        a, b = (np.abs(librosa.stft(s, n_fft=w, hop_length=w // 4, window="hann",
                                    center=True, pad_mode="reflect")) for s in (ref, deg))
        stft += np.abs(np.log10(np.maximum(a, 1e-5) ** 2) - np.log10(np.maximum(b, 1e-5) ** 2)
                       ).mean() + np.abs(a - b).mean()
    assert M.stft_distance(ref, deg) == pytest.approx(stft, rel=1e-6)


def test_si_sdr_matches_torchmetrics(speech16):
    tm = pytest.importorskip("torchmetrics.functional.audio")
    import torch

    rng = np.random.default_rng(3)
    for scale, offset in ((1.0, 0.0), (0.3, 0.01), (2.0, -0.05)):
        deg = scale * noise_at(speech16, rng.uniform(0, 25), seed=int(rng.integers(1000))) + offset
        ours = M.si_sdr(speech16, deg)
        theirs = tm.scale_invariant_signal_distortion_ratio(
            torch.from_numpy(deg.astype(np.float64)), torch.from_numpy(
                speech16.astype(np.float64)), zero_mean=True).item()
        assert ours == pytest.approx(theirs, abs=1e-4)


def test_rates_and_lengths(speech16):
    """Signals at other rates are resampled per metric; a longer reconstruction is cut."""
    up = resample(speech16, 16000, 44100)
    values, _ = measure(speech16, 16000, np.concatenate([up, np.zeros(4410, np.float32)]), 44100,
                        ["snr", "pesq_wb"])
    assert values["snr"] > 40 and values["pesq_wb"] > 4.5
    with pytest.raises(Exception, match="sample_rate"):
        measure(speech16, None, speech16, 16000, ["snr"])


def test_bad_input_gives_no_number(speech16):
    with pytest.raises(MetricError, match="reference is silent"):
        measure(np.zeros(16000, np.float32), 16000, speech16[:16000], 16000)
    with pytest.raises(MetricError, match="reference is silent"):
        measure(1e-5 * speech16, 16000, speech16, 16000)
    bad = speech16.copy()
    bad[100] = np.nan
    with pytest.raises(MetricError, match="reconstruction: contains NaN"):
        measure(speech16, 16000, bad, 16000)
    with pytest.raises(MetricError, match="non-empty mono"):
        measure(speech16, 16000, np.zeros(0, np.float32), 16000)
    short = speech16[:3200]  # 0.2 s
    values, skipped = measure(short, 16000, short, 16000)
    for name in ("pesq_wb", "pesq_nb", "stoi", "estoi", "visqol", "dnsmos"):
        assert name in skipped and "too short" in skipped[name]
    assert set(values) == {"mel_distance", "stft_distance", "si_sdr", "snr"}
    # long enough, but nearly all silence: STOI has too few speech frames, PESQ no utterance
    quiet = np.concatenate([speech16[8000:8000 + 1600], np.zeros(16000, np.float32)])
    values, skipped = measure(quiet, 16000, quiet, 16000, ["stoi", "pesq_wb"])
    assert "fewer than 30 non-silent" in skipped["stoi"] and "stoi" not in values


def test_missing_package_is_skipped_with_its_reason(speech16, monkeypatch):
    monkeypatch.setitem(sys.modules, "pesq", None)  # import pesq now raises ImportError
    values, skipped = measure(speech16, 16000, speech16, 16000, ["pesq_wb", "snr"])
    assert skipped == {"pesq_wb": "needs the pesq package (pip install 'audiotok[eval]')"}
    assert "snr" in values


def test_unknown_metric():
    with pytest.raises(M.AudiotokError, match="unknown metric nope"):
        M.metric_names(["snr", "nope"])
