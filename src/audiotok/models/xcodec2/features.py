"""The semantic branch's input: Kaldi-style log-mel filterbank features, batched, in torch.

Reproduces the extractor X-Codec2 was trained with (SeamlessM4T's numpy extractor of
facebook/w2v-bert-2.0): 16-bit scale, 25 ms frames every 10 ms without edge padding, DC removal,
pre-emphasis 0.97, Povey window, 512-point power spectrum, 80 Kaldi mel bins (20 Hz to Nyquist),
log with a float32-epsilon floor, per-utterance mean/variance normalisation per bin, then pairs
of frames stacked into 160-dim vectors. The spectrum is computed in float64, as the reference
does; any device works.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...nn.masking import time_mask
from ...nn.tracing import exporting

FRAME = 400
SHIFT = 160
FFT = 512
N_MELS = 80
LOW_HZ = 20.0
PREEMPHASIS = 0.97
LOG_FLOOR = 1.192092955078125e-07
PAD_VALUE = 1.0  # value of padded frames in a batch (the extractor's padding_value)
STACK = 2


def kaldi_mel(hz: torch.Tensor) -> torch.Tensor:
    return 1127.0 * torch.log(1.0 + hz / 700.0)


def mel_filters(sample_rate: int, dtype=torch.float64, device=None) -> torch.Tensor:
    """[FFT // 2 + 1, N_MELS] triangles equally spaced on the Kaldi mel scale (built in mel
    space)."""
    edges = torch.linspace(kaldi_mel(torch.tensor(LOW_HZ, dtype=torch.float64)),
                           kaldi_mel(torch.tensor(sample_rate / 2, dtype=torch.float64)),
                           N_MELS + 2, dtype=torch.float64)
    bins = kaldi_mel(torch.linspace(0, sample_rate // 2, FFT // 2 + 1, dtype=torch.float64))
    left, centre, right = edges[:-2], edges[1:-1], edges[2:]
    rising = (bins[:, None] - left) / (centre - left)
    falling = (right - bins[:, None]) / (right - centre)
    return torch.clamp(torch.minimum(rising, falling), min=0).to(device=device, dtype=dtype)


def povey_window(dtype=torch.float64, device=None) -> torch.Tensor:
    n = torch.arange(FRAME, dtype=torch.float64)
    hann = 0.5 - 0.5 * torch.cos(2 * math.pi * n / (FRAME - 1))
    return (hann**0.85).to(device=device, dtype=dtype)


def log_mel(audio: torch.Tensor, sample_rate: int, block: int = 4096,
            filters: torch.Tensor | None = None) -> torch.Tensor:
    """Log-mel frames [B, F, 80] (float32) of audio [B, L] already padded as the codec wants
    (F = 1 + (L - 400) // 160), computed `block` frames at a time to bound memory; `filters`:
    mel_filters(sample_rate), made beforehand (an export then holds them as a constant)."""
    frames = audio.unfold(-1, FRAME, SHIFT)  # [B, F, 400], a view
    window = povey_window(device=audio.device)
    filters = (mel_filters(sample_rate) if filters is None else filters).to(audio.device)
    if exporting():  # one block (the length is symbolic)
        return _log_mel_frames(frames, window, filters)
    return torch.cat([_log_mel_frames(frames[:, i : i + block], window, filters)
                      for i in range(0, frames.shape[1], block)], dim=1)


def _log_mel_frames(frames: torch.Tensor, window: torch.Tensor, filters: torch.Tensor
                    ) -> torch.Tensor:
    frames = (frames.float() * 32768.0).double()
    frames = frames - frames.mean(-1, keepdim=True)
    emphasised = torch.cat([frames[..., :1] * (1 - PREEMPHASIS),
                            frames[..., 1:] - PREEMPHASIS * frames[..., :-1]], dim=-1)
    power = _power(emphasised * window)
    return torch.log(torch.clamp(power @ filters, min=LOG_FLOOR)).float()


def _power(frames: torch.Tensor) -> torch.Tensor:
    """|rfft(frames, FFT)|^2 in float64 of the spectrum rounded to complex64, as the reference
    computes it; when traced for export, the real DFT as float64 matrix products (no complex
    tensors)."""
    if not exporting():
        spectrum = torch.fft.rfft(frames, n=FFT).to(torch.complex64)
        return torch.view_as_real(spectrum).double().pow(2).sum(-1)
    k = torch.arange(FFT // 2 + 1, dtype=torch.float64, device=frames.device)[None, :]
    n = torch.arange(FRAME, dtype=torch.float64, device=frames.device)[:, None]
    angle = 2 * math.pi * ((n * k) % FFT) / FFT  # [400, 257]: frames are zero-padded to 512
    real, imag = frames @ angle.cos(), -(frames @ angle.sin())
    return real.float().double().pow(2) + imag.float().double().pow(2)


def semantic_features(audio: torch.Tensor, lengths: torch.Tensor, hop: int, sample_rate: int,
                      centre: bool = True, filters: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """(features [B, T, 160] float32, valid mask [B, T] bool) for audio [B, P_max] whose item b
    has lengths[b] valid samples (a multiple of `hop`); T = P / hop frames per item.

    Each item is framed with hop // 2 zeros on both sides (centre=False: none, so T = P / hop
    - 1, each frame hop / 2 samples later) and normalised over its own frames; frames past an
    item's end hold PAD_VALUE.
    """
    half = hop // 2 if centre else 0
    b, p_max = audio.shape
    inside = time_mask(lengths.to(audio.device), p_max)
    padded = F.pad(torch.where(inside, audio, torch.zeros_like(audio)), (half, half))
    feats = log_mel(padded, sample_rate, filters=filters)  # [B, F_max, 80]
    n_frames = (lengths + 2 * half - FRAME) // SHIFT + 1
    valid = time_mask(n_frames.to(audio.device), feats.shape[1])
    # float32 statistics, as the reference computes them (numpy on float32 features)
    w = valid[..., None].float()
    count = w.sum(1, keepdim=True)
    mean = (feats * w).sum(1, keepdim=True) / count
    var = (((feats - mean) * w) ** 2).sum(1, keepdim=True) / (count - 1).clamp(min=1)
    norm = (feats - mean) / torch.sqrt(var + 1e-7)
    norm = torch.where(valid[..., None], norm, torch.full_like(norm, PAD_VALUE))
    t = norm.shape[1] // STACK
    stacked = norm[:, : t * STACK].reshape(b, t, STACK * N_MELS)
    return stacked, valid[:, STACK - 1 : t * STACK : STACK]
