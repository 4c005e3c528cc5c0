"""Anti-aliased activation (BigVGAN style): upsample x2, activation, low-pass and downsample x2,
all with a 12-tap Kaiser-windowed sinc and replicate padding at the edges."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masking import edge_tail


def kaiser_sinc_filter(cutoff: float, half_width: float, kernel_size: int) -> torch.Tensor:
    """Low-pass FIR taps [1, 1, kernel_size], normalised to unit DC gain."""
    half = kernel_size // 2
    attenuation = 2.285 * (half - 1) * math.pi * 4 * half_width + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    cpu = torch.device("cpu")  # a constant, also when the model is built on the meta device
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False, dtype=torch.float32,
                                 device=cpu)
    if kernel_size % 2 == 0:
        t = torch.arange(-half, half, device=cpu) + 0.5
    else:
        t = torch.arange(kernel_size, device=cpu) - half
    taps = 2 * cutoff * window * torch.sinc(2 * cutoff * t)
    return (taps / taps.sum()).view(1, 1, kernel_size)


def replicate_pad(x: torch.Tensor, left: int, right: int) -> torch.Tensor:
    """F.pad(x, (left, right), mode="replicate"), the same values, as one concatenation (the
    padding kernel is 1.2-12x slower on CPU)."""
    shape = x.shape[:-1]
    return torch.cat([x[..., :1].expand(*shape, left), x, x[..., -1:].expand(*shape, right)], -1)


class AntiAliasedActivation(nn.Module):
    """act(upsample(x)) low-passed and downsampled back; length preserved. With `lengths`, each
    item of a padded batch gets its own edge padding, as if it were alone."""

    def __init__(self, act: nn.Module, ratio: int = 2, kernel_size: int = 12):
        super().__init__()
        self.act = act
        self.ratio = ratio
        self.kernel_size = kernel_size
        self.register_buffer(
            "filter", kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, kernel_size), persistent=False)
        self.up_pad = kernel_size // ratio - 1
        self.up_crop_left = self.up_pad * ratio + (kernel_size - ratio) // 2
        self.up_crop_right = self.up_pad * ratio + (kernel_size - ratio + 1) // 2
        self.down_pad_left = kernel_size // 2 - int(kernel_size % 2 == 0)
        self.down_pad_right = kernel_size // 2
        # an output depends on inputs at most this many steps away (5 for the default filter)
        self.radius = kernel_size // ratio

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        channels = x.shape[1]
        taps = self.filter.to(x.dtype).expand(channels, -1, -1)
        x = edge_tail(x, lengths, self.up_pad)
        y = replicate_pad(x, self.up_pad, self.up_pad)
        if x.dtype == torch.float32:
            y = self.ratio * F.conv_transpose1d(y, taps, stride=self.ratio, groups=channels)
            y = y[..., self.up_crop_left : y.shape[-1] - self.up_crop_right]
        else:  # the same filter per phase (bf16 conv_transpose is slow: docs/performance.md)
            y = self._upsample_polyphase(y, x.shape[-1])
        y = self.act(y)
        up_lengths = None if lengths is None else lengths * self.ratio
        y = edge_tail(y, up_lengths, self.down_pad_right)
        y = replicate_pad(y, self.down_pad_left, self.down_pad_right)
        return F.conv1d(y, taps, stride=self.ratio, groups=channels)

    def _upsample_polyphase(self, y: torch.Tensor, length: int) -> torch.Tensor:
        """What the transposed convolution above yields, for replicate-padded `y`: output phase
        r takes taps r, r + ratio, ... (reversed) as a plain convolution, phases interleaved."""
        b, channels, _ = y.shape
        r, k = self.ratio, self.kernel_size
        phases = (r * self.filter[0, 0]).view(k // r, r).t().flip(-1)  # [r, k / r]
        weight = phases.to(y.dtype).repeat(channels, 1)[:, None, :]  # [C * r, 1, k / r]
        z = F.conv1d(y, weight, groups=channels)  # [B, C * r, T]
        z = z.view(b, channels, r, -1).transpose(2, 3).reshape(b, channels, -1)
        start = self.up_crop_left - r * (k // r - 1)
        return z[..., start : start + r * length]
