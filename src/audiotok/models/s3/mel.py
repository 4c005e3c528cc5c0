"""The S3 tokenizer's front end: Whisper's 128-bin log-mel spectrogram of 16 kHz audio."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import AudioError
from ...nn.tracing import exporting
from .config import HOP, SAMPLE_RATE

N_FFT = 400


_F_SP = 200.0 / 3  # Slaney's mel scale: linear to 1 kHz, logarithmic above (librosa's arithmetic)
_MIN_LOG_MEL = 1000.0 / _F_SP
_LOG_STEP = np.log(6.4) / 27.0


def _hz_to_mel(f: float) -> float:
    return _MIN_LOG_MEL + np.log(f / 1000.0) / _LOG_STEP if f >= 1000.0 else f / _F_SP


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    hz = _F_SP * m
    log = m >= _MIN_LOG_MEL
    hz[log] = 1000.0 * np.exp(_LOG_STEP * (m[log] - _MIN_LOG_MEL))
    return hz


@lru_cache(maxsize=4)
def mel_filters(n_mels: int = 128, sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT,
                fmax: float = 8000.0) -> torch.Tensor:
    """[n_mels, n_fft / 2 + 1] Slaney-normalised triangles from 0 Hz to fmax, float32: bit for
    bit librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=n_mels, fmax=fmax), which Whisper
    and s3tokenizer ship as mel_filters.npz at 16 kHz (triangles in float64 stored to float32,
    then scaled in place)."""
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(fmax), n_mels + 2))
    gaps = np.diff(edges)
    ramps = np.subtract.outer(edges, freqs)
    weights = np.zeros((n_mels, freqs.size), dtype=np.float32)
    for i in range(n_mels):
        weights[i] = np.maximum(0, np.minimum(-ramps[i] / gaps[i], ramps[i + 2] / gaps[i + 1]))
    weights *= (2.0 / (edges[2:] - edges[:n_mels]))[:, None]
    return torch.from_numpy(weights)


def log_mel(audio: torch.Tensor, n_mels: int = 128) -> torch.Tensor:
    """[n_mels, N // 160] log-mel of one utterance [N] at 16 kHz (float32), or [B, n_mels,
    N // 160] of utterances of one length [B, 1, N]: a centred 400-point STFT every 160
    samples (reflect padding; the last frame dropped), power through mel_filters, log10
    floored at 1e-10 and at 8 below the utterance's maximum (each item's own), then
    (x + 4) / 4. Traced for export, the STFT is float64 real DFT matrix products (no complex
    tensors), |X|^2 rounded as torch rounds it from a complex64 spectrum."""
    if audio.shape[-1] <= N_FFT // 2:
        raise AudioError(f"{audio.shape[-1]} samples is too short for the S3 tokenizer's front "
                         f"end (it needs more than {N_FFT // 2} samples at {SAMPLE_RATE} Hz)")
    x = audio.float().reshape(-1, audio.shape[-1])
    power = _power_dft(x) if exporting() else _power(x)  # [B, 201, F]
    mel = mel_filters(n_mels).to(x.device) @ power
    log = torch.clamp(mel, min=1e-10).log10()
    log = torch.maximum(log, log.amax(dim=(1, 2), keepdim=True) - 8.0)
    out = (log + 4.0) / 4.0
    return out if audio.dim() == 3 else out[0]


def _power(x: torch.Tensor) -> torch.Tensor:
    """|STFT|^2 [B, 201, F] of x [B, N] (torch's FFT, as the references)."""
    window = torch.hann_window(N_FFT, device=x.device)
    stft = torch.stft(x, N_FFT, HOP, window=window, return_complex=True)
    return stft[..., :-1].abs() ** 2


def _power_dft(x: torch.Tensor) -> torch.Tensor:
    """_power with the DFT as float64 matrix products, the magnitude rounded as complex64's."""
    padded = F.pad(x[:, None], (N_FFT // 2, N_FFT // 2), mode="reflect")[:, 0]
    window = torch.hann_window(N_FFT, device=x.device)
    frames = (padded.unfold(-1, N_FFT, HOP)[:, :-1] * window).double()  # [B, F, 400]
    k = torch.arange(N_FFT // 2 + 1, dtype=torch.float64, device=x.device)[None, :]
    n = torch.arange(N_FFT, dtype=torch.float64, device=x.device)[:, None]
    angle = 2 * math.pi * ((n * k) % N_FFT) / N_FFT  # [400, 201]
    real, imag = (frames @ angle.cos()).float(), (frames @ angle.sin()).float()
    magnitude = (real.double() ** 2 + imag.double() ** 2).sqrt().float()
    return (magnitude**2).transpose(1, 2)
