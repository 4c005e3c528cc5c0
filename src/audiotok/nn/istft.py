"""Vocos-style iSTFT head: per-frame log-magnitude and phase -> waveform with "same" padding."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .linear import Linear
from .masking import time_mask
from .tracing import exporting


class ISTFTHead(nn.Module):
    """Linear to (n_fft/2 + 1) log-magnitudes and phases, inverse FFT, periodic Hann window,
    overlap-add, (n_fft - hop) / 2 samples trimmed at each end, divided by the window envelope.
    Output: hop * T samples. Spectral maths always runs in float32."""

    def __init__(self, dim: int, n_fft: int, hop: int):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.trim = (n_fft - hop) // 2
        self.linear = Linear(dim, n_fft + 2)
        self.register_buffer("window", torch.hann_window(n_fft, device="cpu"), persistent=False)

    def _overlap_add(self, frames: torch.Tensor) -> torch.Tensor:
        """frames [B, n_fft, T] -> [B, hop * T] after trimming."""
        out = overlap_add(frames, self.hop)
        return out[:, self.trim : out.shape[-1] - self.trim]

    def _irfft(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        return irfft_polar(magnitude, phase, self.n_fft)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, T, dim] -> audio [B, 1, hop * T]; with `lengths` (frames per item) each item is
        synthesised from its own frames only, as if alone."""
        log_mag, phase = self.linear(x).chunk(2, dim=-1)
        magnitude = torch.exp(log_mag.float()).clamp(max=1e2)
        frames = self._irfft(magnitude, phase.float()).transpose(1, 2)
        frames = frames * self.window[None, :, None]
        b, _, t = frames.shape
        weights = self.window.square()[None, :, None].expand(1, -1, t)
        if lengths is not None:
            keep = time_mask(lengths.to(x.device), t)[:, None, :].float()
            frames = frames * keep
            weights = weights * keep
        envelope = self._overlap_add(weights).clamp(min=1e-11)
        return (self._overlap_add(frames) / envelope)[:, None, :]


def overlap_add(frames: torch.Tensor, hop: int) -> torch.Tensor:
    """frames [B, n, T] laid `hop` apart and summed -> [B, (T - 1) hop + n]; when exporting,
    as n / hop shifted sums of hop-long segments (real-valued, length-independent ops)."""
    b, n, t = frames.shape
    if not exporting():
        size = (t - 1) * hop + n
        return F.fold(frames, output_size=(1, size), kernel_size=(1, n),
                      stride=(1, hop))[:, 0, 0]
    parts = n // hop
    if parts * hop != n:
        raise ValueError(f"graph export needs n_fft ({n}) to be a multiple of hop ({hop})")
    segments = frames.reshape(b, parts, hop, t).transpose(2, 3)  # [B, parts, T, hop]
    out = sum(F.pad(segments[:, j].reshape(b, t * hop), (j * hop, (parts - 1 - j) * hop))
              for j in range(parts))
    return out[:, : (t - 1) * hop + n]


def irfft_polar(magnitude: torch.Tensor, phase: torch.Tensor, n: int) -> torch.Tensor:
    """irfft(polar(magnitude, phase), n) over the last axis; when exporting, as two real
    matrix products with the inverse DFT's cosine and sine tables (float64 tables, the
    products in float32)."""
    if not exporting():
        return torch.fft.irfft(torch.polar(magnitude, phase), n, dim=-1, norm="backward")
    k = torch.arange(n // 2 + 1, dtype=torch.float64)[:, None]
    angle = 2 * torch.pi * ((k * torch.arange(n, dtype=torch.float64)) % n) / n
    edge = (k == 0) | (k == n // 2)  # DC and Nyquist (n even): they appear once, and
    weight = torch.full_like(k, 2.0 / n).where(~edge, 1.0 / n)  # irfft ignores their
    sin = (-weight * angle.sin()).where(~edge, 0.0)  # imaginary parts
    cos, sin = (weight * angle.cos()).float(), sin.float()
    return (magnitude * phase.cos()) @ cos + (magnitude * phase.sin()) @ sin
