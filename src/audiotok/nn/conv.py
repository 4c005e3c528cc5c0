"""Causal convolutions: every output sample depends only on current and past input samples.

Both stream exactly (see streaming.py): a conv keeps its last `left_pad` input samples, a
transposed conv its last input frames, so pieces give the output of the whole signal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .streaming import StreamingModule


class CausalConv1d(StreamingModule):
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
        if self.stream is not None:
            return self._forward_streaming(x)
        length = x.shape[-1]
        right_pad = -length % self.stride
        x = F.pad(x, (self.left_pad, right_pad))
        return self.conv(x)

    def _forward_streaming(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % self.stride:
            raise ValueError(f"streaming input of {x.shape[-1]} steps is not a multiple of the "
                             f"stride {self.stride}")
        context = self.stream.get("context")
        if context is None:
            context = x.new_zeros(x.shape[0], x.shape[1], self.left_pad)
        x = torch.cat([context, x], dim=-1)
        self.stream["context"] = x[..., x.shape[-1] - self.left_pad :].clone()
        return self.conv(x)


class CausalConvTranspose1d(StreamingModule):
    """ConvTranspose1d without its last `kernel - stride` output samples: output = L * stride."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.stride = stride
        self.trim = kernel_size - stride
        self.context_frames = -(-kernel_size // stride) - 1  # earlier frames reaching a new one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stream is not None:
            return self._forward_streaming(x)
        y = self.conv(x)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y

    def _forward_streaming(self, x: torch.Tensor) -> torch.Tensor:
        c, n = self.context_frames, x.shape[-1]
        if c == 0:
            return self.conv(x)
        context = self.stream.get("context")
        if context is None:
            context = x.new_zeros(x.shape[0], x.shape[1], c)
        x = torch.cat([context, x], dim=-1)
        self.stream["context"] = x[..., n:].clone()
        return self.conv(x)[..., c * self.stride : (c + n) * self.stride]
