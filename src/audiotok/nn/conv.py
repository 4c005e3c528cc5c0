"""Causal convolutions: every output sample depends only on current and past input samples."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CausalConv1d(nn.Module):
    """Conv1d with all padding on the left, so that output length = ceil(input length / stride).

    Left pad = effective kernel - stride; the right is zero-padded up to a multiple of the stride.
    The wrapped `conv` holds the (weight-norm folded) `weight` and `bias`.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
    ):
        super().__init__()
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, dilation=dilation,
            groups=groups, bias=bias,
        )
        self.stride = stride
        self.left_pad = (kernel_size - 1) * dilation + 1 - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        right_pad = -length % self.stride
        x = F.pad(x, (self.left_pad, right_pad))
        return self.conv(x)


class CausalConvTranspose1d(nn.Module):
    """ConvTranspose1d without its last `kernel - stride` output samples: output = L * stride."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.trim = kernel_size - stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y
