"""Band-limited resampling by a Hann-windowed sinc, exactly as torchaudio.functional.resample
computes it by default (its kernel built in the audio's dtype, the same padding, strided
convolution and interleave), so models that resample inside (a semantic branch at
16 kHz) give their references' values."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinc_width(orig: int, new: int, width_zeros: int = 6, rolloff: float = 0.99) -> int:
    """Input samples the kernel reaches on each side (rates reduced by their gcd)."""
    return math.ceil(width_zeros * orig / (min(orig, new) * rolloff))


def sinc_kernel(orig: int, new: int, dtype: torch.dtype, device: torch.device | None = None,
                width_zeros: int = 6, rolloff: float = 0.99) -> torch.Tensor:
    """The kernel [new, 1, 2 * width + orig] for rates reduced by their gcd, computed in
    `dtype`: row j gives output sample j of each group of `new` from the inputs around it."""
    base = min(orig, new) * rolloff
    width = sinc_width(orig, new, width_zeros, rolloff)
    idx = torch.arange(-width, width + orig, dtype=dtype, device=device)[None, None] / orig
    t = torch.arange(0, -new, -1, dtype=dtype, device=device)[:, None, None] / new + idx
    t = (t * base).clamp_(-width_zeros, width_zeros)
    window = torch.cos(t * math.pi / width_zeros / 2) ** 2
    t = t * math.pi
    kernel = torch.where(t == 0, torch.tensor(1.0, dtype=dtype, device=device), t.sin() / t)
    return kernel * (window * (base / orig))


class SincResample(nn.Module):
    """Audio [..., N] at `orig` Hz -> [..., ceil(N * new / orig)] at `new` Hz."""

    def __init__(self, orig: int, new: int):
        super().__init__()
        g = math.gcd(orig, new)
        self.orig, self.new = orig // g, new // g
        self.width = sinc_width(self.orig, self.new)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape, n = x.shape[:-1], x.shape[-1]
        x = F.pad(x.reshape(-1, n), (self.width, self.width + self.orig))
        kernel = sinc_kernel(self.orig, self.new, x.dtype, x.device)
        y = F.conv1d(x[:, None], kernel, stride=self.orig)
        # ceil(n new / orig), with a numerator that is never negative (an exported graph's
        # integer division rounds towards zero)
        y = y.transpose(1, 2).reshape(x.shape[0], -1)[:, : (n * self.new + self.orig - 1)
                                                      // self.orig]
        return y.reshape(*shape, -1)
