"""EnCodec 24 kHz's decoder as a stateful stream (nn/stream_steps.py's DecoderStream): every
frame decoded once, the audio out as soon as it is final, equal to the offline decode.

The decoder is causal apart from its start: each convolution reflect-pads its input's first
`(k - 1) d` samples on the left, which needs that many samples and one more, so a layer holds
its first input until it has them (the first convolution, at the frame rate, 7 frames: the
first audio comes once 7 frames are in); then it keeps its last `(k - 1) d` inputs. A stream
that ends before a layer has started pads as the package's pad1d does for a short input (zero-
extension, then reflection). The LSTM carries its state; a transposed convolution keeps its last
input frame and puts out `stride` samples a frame (its overhang is trimmed, as the causal
layer trims it); a residual block adds its 1x1 shortcut of its input to its branch's output
(nn/stream_steps.py's Residual with a skip layer).
"""

from __future__ import annotations

import torch

from ...nn.stream_steps import (
    Chain,
    ConvTranspose,
    DecoderStream,
    Pointwise,
    Residual,
    Step,
    build,
    cat,
)
from .model import SLSTM, EncodecModel, ResnetBlock, SConv1d, SConvTranspose1d, pad1d


class _CausalConv(Step):
    """A stride-1 SConv1d of a causal model: reflection at the start, its context after."""

    STATE = ("held",)

    def __init__(self, layer: SConv1d):
        if layer.stride != 1 or not layer.causal:
            raise ValueError("a stream takes the causal model's stride-1 convolutions")
        self.layer, self.reach = layer, layer.total
        self.held: torch.Tensor | None = None
        self.started = False

    def push(self, x):
        x = cat(self.held, x)
        if not self.started:
            if x.shape[-1] <= self.reach:  # not enough for the reflection yet
                self.held = x
                return None
            self.started = True
            x = pad1d(x, self.reach, 0)  # the reflection the offline pass adds
        out = self.layer.conv(x)
        self.held = x[..., x.shape[-1] - self.reach :] if self.reach else None
        return out

    def flush(self):
        if self.started or self.held is None:
            return None
        self.started = True  # a stream shorter than the reach: the short-input padding
        return self.layer.conv(pad1d(self.held, self.reach, 0))


class _Lstm(Step):
    """The LSTM with its state (h, c), kept batch-first [B, layers, H], plus its input."""

    STATE = ("h", "c")

    def __init__(self, layer: SLSTM):
        self.lstm = layer.lstm
        self.h: torch.Tensor | None = None
        self.c: torch.Tensor | None = None

    def push(self, x):
        seq = x.permute(2, 0, 1)
        state = None if self.h is None else (self.h.transpose(0, 1).contiguous(),
                                             self.c.transpose(0, 1).contiguous())
        y, (h, c) = self.lstm(seq, state)
        self.h, self.c = h.transpose(0, 1), c.transpose(0, 1)
        return (y + seq).permute(1, 2, 0)


def decoder_stream(model: EncodecModel) -> DecoderStream:
    def custom(module) -> Step | None:
        if isinstance(module, SConv1d):
            return _CausalConv(module)
        if isinstance(module, SConvTranspose1d):
            if module.left:
                raise ValueError("a stream takes the causal model's transposed convolutions")
            return ConvTranspose(module.convtr.convtr, tail=0)
        if isinstance(module, SLSTM):
            return _Lstm(module)
        if isinstance(module, ResnetBlock):
            return Residual(Chain([build(m, custom) for m in module.block]), module.shortcut)
        if isinstance(module, torch.nn.ELU):
            return Pointwise(module)
        return None

    spf = model.config.hop_length
    return DecoderStream(build(model.decoder.model, custom), model.quantizer.decode,
                         lambda frames: frames * spf)
