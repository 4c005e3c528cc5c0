"""Convolution layers. Causal ones (every output sample depends only on current and past input
samples) stream exactly (see streaming.py): a conv keeps its last `left_pad` input samples, a
transposed conv its last input frames, so pieces give the output of the whole signal. The
kernels each runs are nn/kernels' (the same sums as F.conv1d / F.conv_transpose1d).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .kernels import (
    cat_time,
    conv1d,
    conv1d_padded,
    conv_transpose1d_padded,
    packed_weights,
    short_conv1d,
    transposed_new_samples,
)
from .streaming import LayerState, StreamingModule, keep_last


@dataclass
class ConvState(LayerState):
    context: torch.Tensor  # [B, C, left_pad]: the last input samples
    started: torch.Tensor | None = None  # [B, 1, 1]: 1 once a row has had a sample (replicate)


@dataclass
class TransposedState(LayerState):
    context: torch.Tensor  # [B, C, frames]: the last input frames that reach new samples


class CausalConv1d(StreamingModule):
    """Conv1d with all padding on the left, so that output length = ceil(input length / stride).

    Left pad = effective kernel - stride; the right is padded up to a multiple of the stride.
    pad_mode "constant" pads with zeros; "replicate" with the first input sample on the left (in
    a stream: the stream's first sample) and the last on the right. The wrapped `conv` holds the
    (weight-norm folded) `weight` and `bias`.
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
        pad_mode: str = "constant",
    ):
        super().__init__()
        if pad_mode not in ("constant", "replicate"):
            raise ValueError(f"pad_mode must be 'constant' or 'replicate', got {pad_mode!r}")
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, dilation=dilation,
            groups=groups, bias=bias,
        )
        self.stride = stride
        self.left_pad = (kernel_size - 1) * dilation + 1 - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.streaming:
            with packed_weights():  # a streaming step's few-row products (kernels)
                return self._forward_streaming(x)
        length = x.shape[-1]
        # output frames as a ceil division, not via -length % stride: a simpler expression
        # for torch.export's symbolic lengths
        right_pad = (length + self.stride - 1) // self.stride * self.stride - length
        c = self.conv
        return conv1d_padded(x, c.weight, c.bias, self.stride, (self.left_pad, right_pad),
                             c.dilation[0], c.groups, self.pad_mode)

    def new_state(self, batch: int, device: torch.device) -> ConvState:
        w = self.conv.weight
        return ConvState(
            torch.zeros(batch, w.shape[1] * self.conv.groups, self.left_pad, device=device,
                        dtype=w.dtype),
            torch.zeros(batch, 1, 1, device=device, dtype=w.dtype)
            if self.pad_mode == "replicate" else None)

    def _forward_streaming(self, x: torch.Tensor) -> torch.Tensor:
        # An input that is not a multiple of the stride ends the stream: it is padded on the
        # right as an offline pass pads the whole signal (the state after it is not used).
        # (a ceil division, as forward's: torch.export states it for a symbolic length, and a
        # traced pad that may be zero stays in the graph)
        n = x.shape[-1]
        tail = (n + self.stride - 1) // self.stride * self.stride - n
        if self.left_pad > 0:
            state = self.current_state(x.shape[0], x.device)
            valid = None if self.ragged is None else self.ragged.valid(x.shape[-1])
            context = state.context
            if self.pad_mode == "replicate":  # before its first sample: the row's first
                first = x[..., :1].expand(-1, -1, self.left_pad).to(context.dtype)
                context = torch.where(state.started > 0, context, first)
                now = torch.ones_like(state.started) if valid is None else \
                    (valid > 0).to(state.started.dtype).view(-1, 1, 1)
                state.started = torch.maximum(state.started, now)
            x = cat_time(context, x)
            state.context = keep_last(x, self.left_pad,
                                      None if valid is None else valid + self.left_pad)
        if not statically_known_true(tail == 0):
            x = F.pad(x, (0, tail), mode=self.pad_mode)
        c = self.conv
        if c.groups == 1:  # a step's few frames: one product over the taps (kernels)
            return short_conv1d(x, c.weight, c.bias, c.dilation[0], self.stride)
        return conv1d(x, c.weight, c.bias, self.stride, c.dilation[0], c.groups)


class CausalConvTranspose1d(StreamingModule):
    """ConvTranspose1d without its last `kernel - stride` output samples: output = L * stride."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 groups: int = 1, bias: bool = True):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride,
                                       groups=groups, bias=bias)
        self.stride = stride
        self.trim = kernel_size - stride
        self.earlier_frames = -(-kernel_size // stride) - 1  # earlier frames reaching a new one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.streaming:
            with packed_weights():  # a streaming step's few-row products (kernels)
                return self._forward_streaming(x)
        c = self.conv
        y = conv_transpose1d_padded(x, c.weight, c.bias, self.stride, groups=c.groups)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y

    def new_state(self, batch: int, device: torch.device) -> TransposedState:
        w = self.conv.weight
        return TransposedState(torch.zeros(batch, w.shape[0], self.earlier_frames,
                                           device=device, dtype=w.dtype))

    def _forward_streaming(self, x: torch.Tensor) -> torch.Tensor:
        c, n = self.earlier_frames, x.shape[-1]
        if c == 0:
            return transposed_new_samples(x, self.conv, 0)
        state = self.current_state(x.shape[0], x.device)
        end = None if self.ragged is None else self.ragged.valid(n) + c
        x = cat_time(state.context, x)
        state.context = keep_last(x, c, end)
        return transposed_new_samples(x, self.conv, c)


class Conv1d(nn.Conv1d):
    """nn.Conv1d (zero padding, the same parameters and names) on channels-last data where that
    is fast: conv1d_padded."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv1d_padded(x, self.weight, self.bias, self.stride[0], self.padding[0],
                             self.dilation[0], self.groups)


class ConvTranspose1d(nn.ConvTranspose1d):
    """nn.ConvTranspose1d (the same parameters and names) on channels-last data where that is
    fast: conv_transpose1d_padded."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_transpose1d_padded(x, self.weight, self.bias, self.stride[0],
                                       self.padding[0], self.output_padding[0], self.groups)
