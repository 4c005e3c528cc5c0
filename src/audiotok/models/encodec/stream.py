"""EnCodec as stateful streams (nn/stream_steps.py): the decoder (every frame decoded once, the
audio out as soon as it is final) and, for the causal 24 kHz model, the encoder (the tokens of
each frame once its samples are in); each equal to its offline pass.

Every convolution reflect-pads its input: on the left `left` samples, which needs that many and
one more, so a layer holds its first input until it has them (the decoder's first convolution,
at the frame rate, 7 frames at 24 kHz: the first audio comes once 7 frames are in; the
encoder's last one likewise: the first tokens once 7 frames of audio are in); then it keeps the
input its next window reads. At the end, the right padding is a reflection of the input's last
samples, plus, for a strided layer, what completes its last window (the package's extra
padding), so the stream's end is the offline end; a stream that ends before a layer has started
pads as the package's pad1d does for a short input (zero-extension, then reflection). The LSTM
carries its state; a transposed convolution keeps its last input frame and trims its overhang as
the layer does; a residual block adds its 1x1 shortcut of its input (or the input) to its
branch's output (nn/stream_steps.py's Residual).
"""

from __future__ import annotations

import torch

from ...nn.kernels import reflect_pad
from ...nn.seanet import SLSTM, ResnetBlock, SConv1d, SConvTranspose1d
from ...nn.stream_steps import (
    Chain,
    ConvTranspose,
    DecoderStream,
    EncoderStream,
    Pointwise,
    Residual,
    Step,
    build,
    cat,
)
from .model import EncodecModel


class _ReflectConv(Step):
    """An SConv1d: the reflection at the start, its context after, the reflection (and the
    extra padding) at the end."""

    STATE = ("held",)

    def __init__(self, layer: SConv1d):
        self.layer, self.kernel, self.stride = layer, layer.kernel, layer.stride
        self.left = layer.total if layer.causal else layer.total - layer.total // 2
        self.right = layer.total - self.left
        if self.stride > 1 and self.left < self.stride:
            # the end's reflection would read input already dropped
            raise ValueError("a stream takes strided convolutions of the causal model only")
        self.held: torch.Tensor | None = None
        self.started = False
        self.phase = 0  # input samples so far, modulo the stride (the end's extra padding)

    def push(self, x):
        self.phase = (self.phase + x.shape[-1]) % self.stride
        x = cat(self.held, x)
        if not self.started:
            if x.shape[-1] <= self.left:  # not enough for the reflection yet
                self.held = x
                return None
            self.started = True
            x = reflect_pad(x, self.left, 0)  # the reflection the offline pass adds
        return self._windows(x)

    def flush(self):
        if self.held is None:
            return None
        right = self.right + (-self.phase % self.stride)
        if not self.started:  # a stream shorter than the left padding: the short-input path
            self.started = True
            x, self.held = self.held, None
            return self.layer.conv(reflect_pad(x, self.left, right))
        return self._windows(reflect_pad(self.held, 0, right))

    def push_last(self, x):
        if x is None or not x.shape[-1]:
            return self.flush()
        self.phase = (self.phase + x.shape[-1]) % self.stride
        x, self.held = cat(self.held, x), None
        right = self.right + (-self.phase % self.stride)
        if not self.started:  # the whole input in one call: the offline layer's
            self.started = True
            return self.layer.conv(reflect_pad(x, self.left, right))
        return self._windows(reflect_pad(x, 0, right))

    def _windows(self, x: torch.Tensor) -> torch.Tensor | None:
        """The output of every whole window of x (x from the next window's first sample)."""
        n = (x.shape[-1] - self.kernel) // self.stride + 1 if x.shape[-1] >= self.kernel else 0
        if n <= 0:
            self.held = x
            return None
        out = self.layer.conv(x[..., : (n - 1) * self.stride + self.kernel])
        self.held = x[..., n * self.stride :]
        return out


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


def _custom(module) -> Step | None:
    if isinstance(module, SConv1d):
        return _ReflectConv(module)
    if isinstance(module, SConvTranspose1d):
        return ConvTranspose(module.convtr.convtr, tail=module.left, skip=module.left)
    if isinstance(module, SLSTM):
        return _Lstm(module)
    if isinstance(module, ResnetBlock):
        skip = None if isinstance(module.shortcut, torch.nn.Identity) else module.shortcut
        return Residual(Chain([build(m, _custom) for m in module.block]), skip)
    if isinstance(module, torch.nn.ELU):
        return Pointwise(module)
    return None


def _check(model: EncodecModel) -> None:
    if model.config.norm != "weight_norm" or model.config.segment is not None:
        raise ValueError("a stream takes the models without GroupNorm or segments")


def decoder_stream(model: EncodecModel) -> DecoderStream:
    _check(model)
    spf = model.config.hop_length
    return DecoderStream(build(model.decoder.model, _custom), model.latents,
                         lambda frames: frames * spf)


def encoder_stream(model: EncodecModel) -> EncoderStream:
    """The causal model's encoder: tokens of the codec's codebooks (model.encode_levels)."""
    _check(model)
    if not model.config.causal:
        raise ValueError("a stream encoder takes the causal model")
    cfg, levels = model.config, model.encode_levels
    # every layer has started once the last convolution (at the frame rate) has the frames
    # its reflection reads: its kernel's width
    settle = cfg.last_kernel_size * cfg.hop_length
    return EncoderStream(build(model.encoder.model, _custom),
                         lambda latents: model.quantizer.encode(latents.float(), levels), levels,
                         cfg.hop_length, settle)


def latents_in_pieces(model: EncodecModel, audio: torch.Tensor, piece: int) -> torch.Tensor:
    """model.encoder(audio) of the causal model: its convolutions up to the LSTM through their
    stream chain, `piece` samples a push and the last 1 to 2 pieces with the end in one call (a
    piece's activations stay in the caches from layer to layer), then the LSTM and the layers
    after it on the whole (the LSTM is one call, as offline). Every convolution then runs on
    inputs of thousands of samples, where its kernels mostly give the one pass's sums: bit for
    bit at all but 1 of 230 random lengths of 4-64 s tried (there the one pass's 1x1 kernels sum
    another way at its width: 6e-8; docs/codecs/encodec.md)."""
    _check(model)
    layers = model.encoder.model
    split = next(i for i, m in enumerate(layers) if isinstance(m, SLSTM))
    chain = build(torch.nn.Sequential(*layers[:split]), _custom)
    audio = audio.to(model.dtype)
    cut = max(audio.shape[-1] // piece - 1, 0) * piece
    out = [chain.push(audio[..., at : at + piece]) for at in range(0, cut, piece)]
    out.append(chain.push_last(audio[..., cut:]))
    return layers[split:](torch.cat([o for o in out if o is not None], -1))
