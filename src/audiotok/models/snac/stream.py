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

import copy

import torch
from torch import nn

from ...nn.activations import Snake1d
from ...nn.conv import Conv1d, ConvTranspose1d, cat_time, conv1d_padded, polyphase_transposed
from .model import DecoderBlock, LocalMHA, NoiseBlock, ResidualUnit, SnacModel, rows_to_levels


def _cat(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    """a then b along time; None (or nothing) on either side is nothing."""
    if a is None or a.shape[-1] == 0:
        return b
    if b is None or b.shape[-1] == 0:
        return a
    return cat_time(a, b)


class _Step:
    """One layer of the stream: push(x) -> the output x now determines (None: nothing yet);
    flush() -> the rest at the end of the stream. STATE names its batch-first tensors (stacked
    and split by rows, see DecoderStream.push_together)."""

    STATE: tuple[str, ...] = ()
    children: tuple[str, ...] = ()

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

    STATE = ("held",)

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

    STATE = ("last",)

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
        y = polyphase_transposed(_cat(self.last, x), self.conv, 1)[..., :count]
        self.last = x[..., -1:]
        drop = min(self.skip, y.shape[-1])
        self.skip -= drop
        return y[..., drop:]


class _Chain(_Step):
    children = ("steps",)

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

    STATE, children = ("held",), ("branch",)

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

    STATE = ("position",)

    def __init__(self, block: NoiseBlock, model: SnacModel, index: int):
        self.block, self.model, self.index = block, model, index
        self.position: torch.Tensor | None = None  # [B] steps so far, per row

    def push(self, x):
        if self.position is None:
            self.position = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        positions = self.position[:, None] + torch.arange(x.shape[-1], device=x.device)
        self.position = self.position + x.shape[-1]
        return self.block(x, self.model.noise_at(self.index, positions, x))


class _Windows(_Step):
    """Local attention over whole windows (the stream's end is padded to whole windows)."""

    STATE = ("held",)

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


def _stack(steps: list[_Step]) -> _Step:
    """One step over the rows of `steps` (the same layer, states of the same shapes)."""
    out = copy.copy(steps[0])
    for name in out.STATE:
        values = [getattr(step, name) for step in steps]
        setattr(out, name, None if values[0] is None else torch.cat(values, 0))
    for name in out.children:
        value = getattr(out, name)
        if isinstance(value, list):
            setattr(out, name, [_stack([getattr(s, name)[i] for s in steps])
                                for i in range(len(value))])
        else:
            setattr(out, name, _stack([getattr(s, name) for s in steps]))
    return out


def _row(step: _Step, i: int) -> _Step:
    """Row i of a stacked step, as its own step."""
    out = copy.copy(step)
    for name in out.STATE:
        value = getattr(out, name)
        setattr(out, name, None if value is None else value[i : i + 1])
    for name in out.children:
        value = getattr(out, name)
        setattr(out, name, [_row(v, i) for v in value] if isinstance(value, list)
                else _row(value, i))
    return out


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

    def key(self) -> tuple:
        """Streams with equal keys hold states of the same shapes (push_together runs them as
        one batch): the same frames so far until the audio starts (each layer's input still
        filling), then the same place in an attention window."""
        return (True, self.frames % self.align) if self.samples else (False, self.frames)

    @staticmethod
    def push_together(streams: list[DecoderStream], tokens: torch.Tensor
                      ) -> list[tuple[DecoderStream, torch.Tensor]]:
        """(streams[i] advanced by tokens[i : i + 1], its audio) for every i, run as one batch
        (equal keys); the given streams are left as they were."""
        batch = copy.copy(streams[0])
        batch.chain = _stack([s.chain for s in streams])
        audio = batch._run(tokens)
        out = []
        for i, s in enumerate(streams):
            new = copy.copy(s)
            new.chain = _row(batch.chain, i) if len(streams) > 1 else batch.chain
            new.frames += tokens.shape[-1]
            new.last = tokens[i : i + 1, :, -1:]
            out.append((new, new._out(None if audio is None else audio[i : i + 1], 1)))
        return out

    def copy(self) -> DecoderStream:
        """An independent copy (its state can advance without this one's)."""
        other = copy.copy(self)
        other.chain = _stack([self.chain])
        return other

    def push(self, tokens: torch.Tensor) -> torch.Tensor:
        """Audio float32 [B, 1, n] for tokens [B, K, t]: the samples now final."""
        if self.last is None and self.frames:
            raise RuntimeError("the stream has finished")
        self.frames += tokens.shape[-1]
        if tokens.shape[-1]:
            self.last = tokens[..., -1:]
        return self._out(self._run(tokens), tokens.shape[0])

    def finish(self) -> torch.Tensor:
        """The rest of the audio: the end padded to whole attention windows with the last frame
        (as the offline decode pads it), then every layer's right padding."""
        if self.last is None:  # nothing pushed, or finished already
            return self._out(None, 1)
        batch, total = self.last.shape[0], self.frames * self.model.config.samples_per_frame
        pad = -self.frames % self.align
        rest = _cat(self._run(self.last.expand(-1, -1, pad)) if pad else None,
                    self.chain.flush())
        self.last = None
        return self._out(None if rest is None else rest[..., : max(0, total - self.samples)],
                         batch)

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
