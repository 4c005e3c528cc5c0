"""SNAC's decoder as a stateful stream: every frame decoded once, the audio out as soon as it is
determined, equal to the offline decode.

No layer of the decoder is causal, but each one reaches a fixed distance ahead, so a stream can
run them all once per push, each layer holding what it needs and putting out the samples its
input now determines (the spec's "stateful alternative"):

- a zero-padded convolution (stride 1, `(K - 1) d / 2` zeros each side) keeps the input it still
  needs; its output lags its input by the right padding, which the end of the stream supplies;
- a transposed convolution keeps its last input frame and drops its first `padding` samples;
- a residual connection delays its input by its branch's lag;
- the noise blocks draw the seeded noise at each sample's absolute position;
- local attention (32/44 kHz) waits for whole windows; the end of a stream is padded to whole
  windows with copies of the last frame, as the offline decode pads it.

Audio comes out 4757 samples (2.3 frames at 24 kHz) behind the codes (the decoder's reach), as
the samples become final rather than in whole frames; work per frame is one frame's decode.
"""

from __future__ import annotations

import torch
from torch import nn

from ...nn.activations import Snake1d
from ...nn.conv import Conv1d, ConvTranspose1d, conv1d_padded, conv_transpose1d_padded
from .model import DecoderBlock, LocalMHA, NoiseBlock, ResidualUnit, SnacModel, rows_to_levels


def _cat(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    """a then b along time; None (or nothing) on either side is nothing."""
    if a is None or a.shape[-1] == 0:
        return b
    if b is None or b.shape[-1] == 0:
        return a
    return torch.cat([a, b], -1)


class _Step:
    """One layer of the stream: push(x) -> the output x now determines (None: nothing yet);
    flush() -> the rest at the end of the stream."""

    def push(self, x: torch.Tensor) -> torch.Tensor | None:
        raise NotImplementedError

    def flush(self) -> torch.Tensor | None:
        return None


class _Pointwise(_Step):
    def __init__(self, layer: nn.Module):
        self.layer = layer

    def push(self, x):
        return self.layer(x)


class _Conv(_Step):
    """A zero-padded stride-1 convolution: the input it still needs, the left zeros first;
    the right zeros at the end."""

    def __init__(self, conv: Conv1d):
        k, d, p = conv.kernel_size[0], conv.dilation[0], conv.padding[0]
        if conv.stride[0] != 1 or 2 * p != (k - 1) * d:
            raise ValueError("a stream takes stride-1 convolutions padded to their input length")
        self.conv, self.reach, self.pad = conv, (k - 1) * d, p
        self.held: torch.Tensor | None = None

    def push(self, x):
        if self.held is None:
            self.held = x.new_zeros(x.shape[0], x.shape[1], self.pad)
        x = _cat(self.held, x)
        ready = x.shape[-1] - self.reach
        if ready <= 0:
            self.held = x
            return None
        c = self.conv
        self.held = x[..., ready:]
        return conv1d_padded(x, c.weight, c.bias, 1, 0, c.dilation[0], c.groups)

    def flush(self):
        if self.held is None:
            return None
        return self.push(self.held.new_zeros(*self.held.shape[:2], self.pad))


class _ConvTranspose(_Step):
    """Kernel 2 s, stride s: sample j of the unpadded output gets input frames floor(j / s) - 1
    and floor(j / s); the offline output is that from sample `padding` on."""

    def __init__(self, conv: ConvTranspose1d):
        s = conv.stride[0]
        if conv.kernel_size[0] != 2 * s or conv.groups != 1:
            raise ValueError("a stream takes transposed convolutions of kernel 2 x stride")
        self.conv, self.stride, self.skip = conv, s, conv.padding[0]
        self.last: torch.Tensor | None = None  # the previous input frame

    def push(self, x):
        if self.last is None:
            self.last = torch.zeros_like(x[..., :1])
        return self._run(x, x.shape[-1] * self.stride)

    def flush(self):
        if self.last is None:
            return None
        return self._run(torch.zeros_like(self.last), self.conv.padding[0])

    def _run(self, x: torch.Tensor, count: int) -> torch.Tensor:
        """`count` samples of the unpadded output from the previous frame's on, x the input
        frames after it."""
        c, s = self.conv, self.stride
        y = conv_transpose1d_padded(_cat(self.last, x), c.weight, c.bias, s)[..., s : s + count]
        self.last = x[..., -1:]
        drop = min(self.skip, y.shape[-1])
        self.skip -= drop
        return y[..., drop:]


class _Chain(_Step):
    def __init__(self, steps: list[_Step]):
        self.steps = steps

    def push(self, x):
        for step in self.steps:
            if x is None or x.shape[-1] == 0:
                return None
            x = step.push(x)
        return x

    def flush(self):
        x = None
        for step in self.steps:
            head = step.push(x) if x is not None and x.shape[-1] else None
            x = _cat(head, step.flush())
        return x


class _Residual(_Step):
    """x + branch(x): x held until the branch's output for it comes."""

    def __init__(self, branch: _Step):
        self.branch, self.held = branch, None

    def push(self, x):
        self.held = _cat(self.held, x)
        return self._add(self.branch.push(x))

    def flush(self):
        return self._add(self.branch.flush())

    def _add(self, y):
        if y is None or y.shape[-1] == 0:
            return None
        n = y.shape[-1]
        out = self.held[..., :n] + y
        self.held = self.held[..., n:]
        return out


class _Noise(_Step):
    """x + n * conv1x1(x), n the model's noise at each step's absolute position."""

    def __init__(self, block: NoiseBlock, model: SnacModel, index: int):
        self.block, self.model, self.index, self.position = block, model, index, 0

    def push(self, x):
        positions = self.position + torch.arange(x.shape[-1], device=x.device)[None]
        self.position += x.shape[-1]
        return self.block(x, self.model.noise_at(self.index, positions, x))


class _Windows(_Step):
    """Local attention over whole windows (the stream's end is padded to whole windows)."""

    def __init__(self, attention: LocalMHA):
        self.attention, self.held = attention, None

    def push(self, x):
        self.held = _cat(self.held, x)
        whole = self.held.shape[-1] // self.attention.window * self.attention.window
        if whole == 0:
            return None
        ready, self.held = self.held[..., :whole], self.held[..., whole:]
        return self.attention(ready)

    def flush(self):
        if self.held is not None and self.held.shape[-1]:
            raise RuntimeError("a stream ended inside an attention window")
        return None


def _steps(module: nn.Module, model: SnacModel, blocks: list[int]) -> _Step:
    if isinstance(module, Conv1d):
        return _Conv(module)
    if isinstance(module, ConvTranspose1d):
        return _ConvTranspose(module)
    if isinstance(module, Snake1d | nn.Tanh):
        return _Pointwise(module)
    if isinstance(module, ResidualUnit):
        return _Residual(_steps(module.block, model, blocks))
    if isinstance(module, NoiseBlock):
        blocks[0] += 1
        return _Noise(module, model, blocks[0] - 1)
    if isinstance(module, LocalMHA):
        return _Windows(module)
    if isinstance(module, DecoderBlock | nn.Sequential):
        layers = module.block if isinstance(module, DecoderBlock) else module
        return _Chain([_steps(m, model, blocks) for m in layers])
    raise TypeError(f"no stream step for {type(module).__name__}")


class DecoderStream:
    """Tokens [B, K, t] in, the audio they determine out (any number of samples); `finish()`
    gives the rest. The whole equals model.decode of all the tokens (window-padded alike)."""

    def __init__(self, model: SnacModel, align: int):
        self.model, self.align = model, align
        self.chain = _steps(model.decoder.model, model, [0])
        self.frames = 0
        self.samples = 0
        self.last: torch.Tensor | None = None  # the last frame's tokens

    def push(self, tokens: torch.Tensor) -> torch.Tensor:
        """Audio float32 [B, 1, n] for tokens [B, K, t]: the samples now final."""
        self.frames += tokens.shape[-1]
        if tokens.shape[-1]:
            self.last = tokens[..., -1:]
        return self._out(self._run(tokens), tokens.shape[0])

    def finish(self) -> torch.Tensor:
        """The rest of the audio: the end padded to whole attention windows with the last frame
        (as the offline decode pads it), then every layer's right padding."""
        batch = 1 if self.last is None else self.last.shape[0]
        if self.last is None:
            return self._out(None, batch)
        total = self.frames * self.model.config.samples_per_frame
        pad = -self.frames % self.align
        rest = _cat(self._run(self.last.expand(-1, -1, pad)) if pad else None,
                    self.chain.flush())
        return self._out(rest[..., : max(0, total - self.samples)], batch)

    def _run(self, tokens: torch.Tensor) -> torch.Tensor | None:
        if tokens.shape[-1] == 0:
            return None
        return self.chain.push(self.model.quantizer.decode(rows_to_levels(tokens,
                                                                          self.model.config)))

    def _out(self, audio: torch.Tensor | None, batch: int) -> torch.Tensor:
        if audio is None:
            return torch.zeros(batch, 1, 0)
        audio = audio.float()
        self.samples += audio.shape[-1]
        return audio
