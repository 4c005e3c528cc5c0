"""Reconstruction metrics, each at one documented sample rate.

`measure(reference, ref_rate, degraded, deg_rate)` resamples both signals to each metric's rate
(soxr HQ), makes the degraded signal the reference's length (cut, or zero-padded) and returns
{metric: value} and {metric: reason it was skipped}. A metric never returns a number for input it
is not defined on: silent references, items too short for it, NaN, a missing package.

The signal metrics are our own code (numpy / torch, float64); the perceptual ones wrap their
reference packages from the `eval` extra: pesq, pystoi, visqol-python, speechmos.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ..audio import resample
from ..errors import AudiotokError

SILENCE_DBFS = -60.0  # a reference quieter than this (RMS) measures nothing
# SI-SDR / SNR regulariser: identical signals give 10 log10(energy / EPS), the numerical limit
EPS = float(np.finfo(np.float64).eps)


class MetricError(AudiotokError, ValueError):
    """Input a metric is not defined on (the caller records the reason and goes on)."""


class MetricUnavailable(MetricError):
    """The metric's package is not installed."""


@dataclass(frozen=True)
class Metric:
    name: str
    rate: int  # the sample rate it is computed at
    fn: Callable[[np.ndarray, np.ndarray], float | dict[str, float]]
    higher_is_better: bool
    description: str
    min_seconds: float = 0.0
    reference_free: bool = False  # DNSMOS: scores the degraded signal alone
    outputs: tuple[str, ...] = ()  # names of a metric that gives several values

    @property
    def names(self) -> tuple[str, ...]:
        return self.outputs or (self.name,)


# -- signal metrics ---------------------------------------------------------------------------

def _stft_mag(x: torch.Tensor, window: int) -> torch.Tensor:
    """|STFT| with a periodic Hann window, hop window/4, centred with reflect padding (DAC's
    audiotools STFT), float64 [F, T]."""
    return torch.stft(x, window, window // 4, window, torch.hann_window(window, dtype=x.dtype),
                      center=True, pad_mode="reflect", return_complex=True).abs()


@lru_cache(maxsize=32)
def _mel_basis(rate: int, n_fft: int, n_mels: int) -> torch.Tensor:
    """Slaney-style mel filterbank (slaney mel scale, slaney area normalisation, 0 Hz to
    rate/2): the filters librosa.filters.mel(sr, n_fft, n_mels) gives, computed here."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(f >= 1000.0, log, lin)

    def mel_to_hz(m):
        lin = (200.0 / 3) * m
        log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
        return np.where(m >= 15.0, log, lin)

    fft_freqs = np.linspace(0, rate / 2, n_fft // 2 + 1)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(rate / 2), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2: n_mels + 2] - mel_f[:n_mels]))[:, None]
    return torch.from_numpy(weights)


MEL_SCALES = ((5, 32), (10, 64), (20, 128), (40, 256), (80, 512), (160, 1024), (320, 2048))
STFT_WINDOWS = (2048, 512)
CLAMP = 1e-5


def mel_distance(ref: np.ndarray, deg: np.ndarray, rate: int = 44100) -> float:
    """DAC's multi-scale mel distance: for (mel bands, window) in MEL_SCALES, hop window/4, the
    mean |log10(max(mel(ref), 1e-5)) - log10(max(mel(deg), 1e-5))| of magnitude mel
    spectrograms, summed over the 7 scales. 0 for identical signals; lower is better."""
    x, y = torch.from_numpy(ref.astype(np.float64)), torch.from_numpy(deg.astype(np.float64))
    total = 0.0
    for n_mels, window in MEL_SCALES:
        basis = _mel_basis(rate, window, n_mels)
        mx, my = basis @ _stft_mag(x, window), basis @ _stft_mag(y, window)
        total += (mx.clamp_min(CLAMP).log10() - my.clamp_min(CLAMP).log10()).abs().mean().item()
    return total


def stft_distance(ref: np.ndarray, deg: np.ndarray) -> float:
    """DAC's multi-scale STFT distance: for windows 2048 and 512, hop window/4, mean
    |log10(max(|X|, 1e-5)^2) - log10(max(|Y|, 1e-5)^2)| + mean ||X| - |Y||, summed."""
    x, y = torch.from_numpy(ref.astype(np.float64)), torch.from_numpy(deg.astype(np.float64))
    total = 0.0
    for window in STFT_WINDOWS:
        mx, my = _stft_mag(x, window), _stft_mag(y, window)
        log = (mx.clamp_min(CLAMP).pow(2).log10() - my.clamp_min(CLAMP).pow(2).log10()).abs()
        total += log.mean().item() + (mx - my).abs().mean().item()
    return total


def si_sdr(ref: np.ndarray, deg: np.ndarray) -> float:
    """Scale-invariant SDR (Le Roux et al. 2019), both signals made zero-mean, in dB:
    10 log10((|a s|^2 + eps) / (|a s - y|^2 + eps)) with a = <y, s> / |s|^2. Gain-invariant,
    not delay-invariant."""
    s = ref.astype(np.float64) - ref.mean(dtype=np.float64)
    y = deg.astype(np.float64) - deg.mean(dtype=np.float64)
    target = (np.dot(y, s) + EPS) / (np.dot(s, s) + EPS) * s
    return 10 * math.log10((np.dot(target, target) + EPS) / (np.sum((target - y) ** 2) + EPS))


def snr(ref: np.ndarray, deg: np.ndarray) -> float:
    """10 log10(|s|^2 / |s - y|^2) in dB (eps-regularised); neither gain- nor delay-invariant."""
    s, y = ref.astype(np.float64), deg.astype(np.float64)
    return 10 * math.log10((np.dot(s, s) + EPS) / (np.sum((s - y) ** 2) + EPS))


# -- perceptual and intelligibility metrics (eval extra) --------------------------------------

def _need(module: str, package: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise MetricUnavailable(f"needs the {package} package (pip install 'audiotok[eval]')") \
            from None


def _pesq(mode: str, rate: int):
    def fn(ref: np.ndarray, deg: np.ndarray) -> float:
        pesq = _need("pesq", "pesq")
        try:
            return float(pesq.pesq(rate, ref.astype(np.float32), deg.astype(np.float32), mode))
        except pesq.PesqError as e:  # no utterances found, buffer too short, ...
            raise MetricError(f"PESQ: {type(e).__name__}: {e}") from None
    return fn


def _stoi(extended: bool):
    def fn(ref: np.ndarray, deg: np.ndarray) -> float:
        pystoi = _need("pystoi", "pystoi")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = float(pystoi.stoi(ref.astype(np.float64), deg.astype(np.float64), 16000,
                                      extended=extended))
        # pystoi warns and returns 1e-5 when fewer than 30 frames remain after removing silence
        for w in caught:
            if "Not enough STFT frames" in str(w.message):
                raise MetricError("fewer than 30 non-silent 25.6 ms frames (pystoi needs "
                                  "about 0.4 s of speech)")
        return value
    return fn


@lru_cache(maxsize=1)
def _visqol_api():
    visqol = _need("visqol", "visqol-python")
    api = visqol.VisqolApi()
    try:  # the deep-lattice model is ViSQOL's own speech default; without it, the SVR mapping
        api.create(mode="speech", use_lattice_model=True)
        api.lattice = True
    except ImportError:
        api.create(mode="speech", use_lattice_model=False)
        api.lattice = False
    return api


def visqol_lattice() -> bool | None:
    """Whether ViSQOL speech mode runs its deep-lattice model (None: not installed)."""
    try:
        return _visqol_api().lattice
    except MetricUnavailable:
        return None


def _visqol(ref: np.ndarray, deg: np.ndarray) -> float:
    api = _visqol_api()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = api.measure_from_arrays(ref.astype(np.float64), deg.astype(np.float64), 16000)
    return float(result.moslqo)


@lru_cache(maxsize=1)
def _dnsmos_model():
    """speechmos's DNSMOS (P.835 and P.808 models) with sessions on torch's thread count that
    do not spin while idle (its own take every core and spin, which starves whatever else the
    process or the machine runs)."""
    dnsmos = _need("speechmos.dnsmos", "speechmos")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    folder = Path(dnsmos.__file__).parent / "dnsmos_models"
    model = dnsmos.DNSMOS.__new__(dnsmos.DNSMOS)
    model.primary_model_path = str(folder / "sig_bak_ovr.onnx")
    model.onnx_sess = ort.InferenceSession(model.primary_model_path, options)
    model.p808_onnx_sess = ort.InferenceSession(str(folder / "model_v8.onnx"), options)
    return model


def _dnsmos(ref: np.ndarray, deg: np.ndarray) -> dict[str, float]:
    # the degraded signal as a 16-bit player would play it: clipped to [-1, 1]
    out = _dnsmos_model()(np.clip(deg, -1.0, 1.0).astype(np.float32), 16000, False)
    return {"dnsmos_sig": float(out["sig_mos"]), "dnsmos_bak": float(out["bak_mos"]),
            "dnsmos_ovrl": float(out["ovrl_mos"])}


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("mel_distance", 44100, lambda r, d: mel_distance(r, d, 44100), False,
           "multi-scale mel distance (DAC: 7 scales, 5-320 bands, windows 32-2048)", 0.05),
    Metric("stft_distance", 44100, stft_distance, False,
           "multi-scale STFT distance (DAC: windows 2048 and 512, log + linear magnitude)", 0.05),
    Metric("si_sdr", 16000, si_sdr, True, "scale-invariant SDR, dB"),
    Metric("snr", 16000, snr, True, "signal-to-noise ratio, dB"),
    Metric("pesq_wb", 16000, _pesq("wb", 16000), True, "PESQ wide-band (P.862.2), MOS-LQO",
           0.25),
    Metric("pesq_nb", 8000, _pesq("nb", 8000), True, "PESQ narrow-band (P.862.1), MOS-LQO",
           0.25),
    Metric("stoi", 16000, _stoi(False), True, "STOI (pystoi, resamples to 10 kHz inside)", 0.5),
    Metric("estoi", 16000, _stoi(True), True, "extended STOI", 0.5),
    Metric("visqol", 16000, _visqol, True, "ViSQOL v3 speech mode, MOS-LQO", 0.5),
    Metric("dnsmos", 16000, _dnsmos, True,
           "DNSMOS P.835 (SIG, BAK, OVRL) of the reconstruction alone", 1.0,
           reference_free=True, outputs=("dnsmos_sig", "dnsmos_bak", "dnsmos_ovrl")),
)}
DEFAULT_METRICS = tuple(METRICS)
HIGHER_IS_BETTER = {n: m.higher_is_better for m in METRICS.values() for n in m.names}


def metric_names(names) -> tuple[str, ...]:
    """Check a list of metric names (empty or None: all)."""
    if not names:
        return DEFAULT_METRICS
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise AudiotokError(f"unknown metric {', '.join(unknown)}; expected some of "
                            f"{', '.join(METRICS)}")
    return tuple(dict.fromkeys(names))


def check_signal(x: np.ndarray, what: str) -> None:
    if x.ndim != 1 or x.size == 0:
        raise MetricError(f"{what}: expected a non-empty mono signal, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise MetricError(f"{what}: contains NaN or Inf")


def rms_dbfs(x: np.ndarray) -> float:
    rms = math.sqrt(float(np.mean(np.square(x, dtype=np.float64))))
    return 20 * math.log10(rms) if rms > 0 else -math.inf


class Resampled:
    """One signal at each rate asked for (resampled once per rate)."""

    def __init__(self, x: np.ndarray, rate: int):
        self.x, self.rate, self._at = x, rate, {}

    def at(self, rate: int, length: int | None = None) -> np.ndarray:
        if rate not in self._at:
            self._at[rate] = resample(self.x, self.rate, rate)
        y = self._at[rate]
        if length is not None and len(y) != length:  # the reference's length: cut or pad
            y = y[:length] if len(y) > length else np.pad(y, (0, length - len(y)))
        return y


def measure(reference: np.ndarray | Resampled, ref_rate: int | None, degraded: np.ndarray,
            deg_rate: int, metrics=None) -> tuple[dict[str, float], dict[str, str]]:
    """({value name: value}, {metric: why skipped}) for the metrics named (default: all).

    Both signals are mono float at their own rates; each metric gets them resampled to its rate,
    the degraded one cut or zero-padded to the reference's length. A bad degraded signal (NaN)
    or reference (empty, silent) raises MetricError."""
    if not isinstance(reference, Resampled) and not ref_rate:
        raise MetricError("reference: give its sample_rate")
    if not deg_rate:
        raise MetricError("reconstruction: give its sample_rate")
    ref = reference if isinstance(reference, Resampled) else Resampled(
        np.asarray(reference, dtype=np.float32), int(ref_rate))
    check_signal(ref.x, "reference")
    degraded = np.asarray(degraded, dtype=np.float32)
    check_signal(degraded, "reconstruction")
    level = rms_dbfs(ref.x)
    if level < SILENCE_DBFS:
        raise MetricError(f"reference is silent ({level:.1f} dBFS RMS, below {SILENCE_DBFS:g})")
    deg = Resampled(degraded, deg_rate)
    seconds = len(ref.x) / ref.rate
    values: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for name in metric_names(metrics):
        m = METRICS[name]
        if seconds < m.min_seconds:
            skipped[name] = f"too short: {seconds:.3f} s (needs {m.min_seconds:g} s)"
            continue
        r = ref.at(m.rate)
        try:
            out = m.fn(r, deg.at(m.rate, len(r)))
        except MetricError as e:
            skipped[name] = str(e)
            continue
        out = out if isinstance(out, dict) else {name: out}
        bad = [k for k, v in out.items() if not math.isfinite(v)]
        if bad:
            skipped[name] = f"gave a non-finite value ({', '.join(bad)})"
            continue
        values.update(out)
    return values, skipped
