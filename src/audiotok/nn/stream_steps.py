"""A non-causal convolutional decoder as a stateful stream: every frame decoded once, the audio
out as soon as it is final, equal to the offline decode (for decoders of Snake residual blocks).

No layer is causal, but each one reaches a fixed distance ahead, so a stream can run them all
once per push, each layer holding what it needs and putting out the samples its input now
determines:

- a zero-padded convolution (stride 1, `(K - 1) d / 2` zeros each side) keeps the input it still
  needs; its output lags its input by the right padding, which the end of the stream supplies;
- a transposed convolution (kernel 2 x stride) keeps its last input frame and drops its first
  `padding` samples;
- a residual connection delays its input by its branch's lag;
- pointwise layers (Snake, tanh) run as they are.

A codec adds steps for its own layers (`build(module, custom)`) and wraps the chain in a
`DecoderStream` with its tokens-to-latents function. Streams whose states have the same shapes
run as one batch (`DecoderStream.push_together`, the engine's StatefulDecode). An encoder's
chain (audio to latents, e.g. EnCodec's) runs the same way in an `EncoderStream`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from .activations import Snake1d
from .conv import Conv1d, ConvTranspose1d
from .kernels import cat_time, conv1d_padded, transposed_new_samples
from .snake_blocks import DecoderBlock, ResidualUnit


def cat(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    """a then b along time; None (or nothing) on either side is nothing."""
    if a is None or a.shape[-1] == 0:
        return b
    if b is None or b.shape[-1] == 0:
        return a
    return cat_time(a, b)


class Step:
    """One layer of the stream: push(x) -> the output x now determines (None: nothing yet);
    flush() -> the rest at the end of the stream. STATE names its batch-first tensors (stacked
    and split by rows, see DecoderStream.push_together). An output is the caller's to change:
    no step keeps its output (Residual adds into its branch's output in place, an in-place
    activation changes the output of the step before it). A Residual keeps its input, so the
    first step of its branch runs out of place."""

    STATE: tuple[str, ...] = ()
    children: tuple[str, ...] = ()

    def push(self, x: torch.Tensor) -> torch.Tensor | None:
        raise NotImplementedError

    def flush(self) -> torch.Tensor | None:
        return None

    def push_last(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """push(x) (x None or empty: nothing) then flush(): the output of x and of the end. A
        layer that pads the end overrides it to run x and the end as one call, as an offline
        pass does."""
        head = self.push(x) if x is not None and x.shape[-1] else None
        return cat(head, self.flush())


class Pointwise(Step):
    def __init__(self, layer: nn.Module):
        self.layer = layer

    def push(self, x):
        return self.layer(x)


class Conv(Step):
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
        x = cat(self.held, x)
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


class ConvTranspose(Step):
    """Kernel 2 s, stride s: sample j of the unpadded output gets input frames floor(j / s) - 1
    and floor(j / s); the offline output is that from sample `padding` on, `tail` samples past
    the last frame's s (`padding` when output_padding makes the output L * s long). A layer
    that trims its output itself (padding 0 in the convolution) gives `skip` and `tail`."""

    STATE = ("last",)

    def __init__(self, conv: ConvTranspose1d, tail: int | None = None, skip: int | None = None):
        s = conv.stride[0]
        if conv.kernel_size[0] != 2 * s or conv.groups != 1:
            raise ValueError("a stream takes transposed convolutions of kernel 2 x stride")
        self.conv, self.stride = conv, s
        self.skip = conv.padding[0] if skip is None else skip  # samples dropped at the start
        # the samples after the last frame's s: the offline output is (L + 1) s - 2 padding
        # + output_padding long, from sample `padding` on (a causal layer that trims its
        # overhang itself, tail=0, keeps L * s)
        self.tail = s - conv.padding[0] + conv.output_padding[0] if tail is None else tail
        self.last: torch.Tensor | None = None  # the previous input frame

    def push(self, x):
        if self.last is None:
            self.last = torch.zeros_like(x[..., :1])
        return self._run(x, x.shape[-1] * self.stride)

    def flush(self):
        if self.last is None:
            return None
        return self._run(torch.zeros_like(self.last), self.tail)

    def _run(self, x: torch.Tensor, count: int) -> torch.Tensor:
        """`count` samples of the unpadded output from the previous frame's on, x the input
        frames after it."""
        y = transposed_new_samples(cat(self.last, x), self.conv, 1)[..., :count]
        self.last = x[..., -1:]
        drop = min(self.skip, y.shape[-1])
        self.skip -= drop
        return y[..., drop:]


class Chain(Step):
    children = ("steps",)

    def __init__(self, steps: list[Step]):
        self.steps = steps

    def push(self, x):
        for step in self.steps:
            if x is None or x.shape[-1] == 0:
                return None
            x = step.push(x)
        return x

    def flush(self):
        return self.push_last(None)

    def push_last(self, x):
        for step in self.steps:
            x = step.push_last(x)
        return x


class Residual(Step):
    """x + branch(x), or skip(x) + branch(x) with a pointwise-in-time `skip` layer (a 1x1
    convolution): x held until the branch's output for it comes."""

    STATE, children = ("held",), ("branch",)

    def __init__(self, branch: Step, skip: nn.Module | None = None):
        self.branch, self.skip, self.held = branch, skip, None

    def push(self, x):
        self.held = cat(self.held, x)
        return self._add(self.branch.push(x))

    def flush(self):
        return self._add(self.branch.flush())

    def push_last(self, x):
        if x is not None and x.shape[-1]:
            self.held = cat(self.held, x)
        return self._add(self.branch.push_last(x))

    def _add(self, y):
        if y is None or y.shape[-1] == 0:
            return None
        n = y.shape[-1]
        x = self.held[..., :n]
        # in place: the branch's output is this step's (Step); the same sum as x + y
        out = y.add_(x if self.skip is None else self.skip(x))
        self.held = self.held[..., n:]
        return out


def stack(steps: list[Step]) -> Step:
    """One step over the rows of `steps` (the same layer, states of the same shapes). Steps
    replace their state tensors (never write into them), so the step of one is a structural
    copy sharing its tensors."""
    out = copy.copy(steps[0])
    for name in out.STATE:
        values = [getattr(step, name) for step in steps]
        setattr(out, name, values[0] if values[0] is None or len(values) == 1
                else torch.cat(values, 0))
    for name in out.children:
        value = getattr(out, name)
        if isinstance(value, list):
            setattr(out, name, [stack([getattr(s, name)[i] for s in steps])
                                for i in range(len(value))])
        else:
            setattr(out, name, stack([getattr(s, name) for s in steps]))
    return out


def row(step: Step, i: int) -> Step:
    """Row i of a stacked step, as its own step."""
    out = copy.copy(step)
    for name in out.STATE:
        value = getattr(out, name)
        setattr(out, name, None if value is None else value[i : i + 1])
    for name in out.children:
        value = getattr(out, name)
        setattr(out, name, [row(v, i) for v in value] if isinstance(value, list)
                else row(value, i))
    return out


def build(module: nn.Module, custom: Callable[[nn.Module], Step | None] | None = None) -> Step:
    """The stream step of `module`: `custom(module)` when it gives one (a codec's own layers),
    else the generic ones (convolutions, transposed convolutions, Snake, tanh, residual units,
    DAC-style decoder blocks, Sequential)."""
    step = custom(module) if custom is not None else None
    if step is not None:
        return step
    if isinstance(module, Conv1d):
        return Conv(module)
    if isinstance(module, ConvTranspose1d):
        return ConvTranspose(module)
    if isinstance(module, Snake1d | nn.Tanh):
        return Pointwise(module)
    if isinstance(module, ResidualUnit):
        return Residual(build(module.block, custom))
    if isinstance(module, DecoderBlock):
        return build(module.block, custom)
    if isinstance(module, nn.Sequential):
        return Chain([build(m, custom) for m in module])
    raise TypeError(f"no stream step for {type(module).__name__}")


class DecoderStream:
    """Tokens [B, K, t] in, the audio they determine out (any number of samples); `finish()`
    gives the rest. The whole equals the offline decode of all the tokens.

    chain: the decoder's steps (build); latents(tokens) -> the decoder's input; total(frames)
    -> the samples the offline decode gives for that many frames; align: the end is padded to
    a multiple of `align` frames with copies of the last frame (an attention window), as the
    offline decode pads it."""

    def __init__(self, chain: Step, latents: Callable[[torch.Tensor], torch.Tensor],
                 total: Callable[[int], int], align: int = 1):
        self.chain, self.latents, self.total, self.align = chain, latents, total, align
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
        news, audio = _together(streams, lambda batch: batch._run(tokens))
        out = []
        for i, new in enumerate(news):
            new.frames += tokens.shape[-1]
            new.last = tokens[i : i + 1, :, -1:]
            out.append((new, new._out(None if audio is None else audio[i : i + 1], 1)))
        return out

    def copy(self) -> DecoderStream:
        """An independent copy (its state can advance without this one's)."""
        other = copy.copy(self)
        other.chain = stack([self.chain])
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
        batch, total = self.last.shape[0], self.total(self.frames)
        pad = -self.frames % self.align
        rest = cat(self._run(self.last.expand(-1, -1, pad)) if pad else None,
                    self.chain.flush())
        self.last = None
        return self._out(None if rest is None else rest[..., : max(0, total - self.samples)],
                         batch)

    def _run(self, tokens: torch.Tensor) -> torch.Tensor | None:
        if tokens.shape[-1] == 0:
            return None
        return self.chain.push(self.latents(tokens))

    def _out(self, audio: torch.Tensor | None, batch: int) -> torch.Tensor:
        if audio is None:
            return torch.zeros(batch, 1, 0)
        audio = audio.float()
        self.samples += audio.shape[-1]
        return audio


class EncoderStream:
    """Audio [B, C, n] in, the tokens of the frames it makes final out (any number of samples a
    push); `finish()` gives the rest, the end padded as the offline encode pads it. The whole
    equals the offline encode of all the audio.

    chain: the encoder's steps (build); tokens(latents [B, D, t]) -> codes [B, K, t] of
    `codebooks` rows; frame: samples a frame; settle: samples after which every layer has
    started, so that the states' shapes depend only on the samples modulo `frame`."""

    def __init__(self, chain: Step, tokens: Callable[[torch.Tensor], torch.Tensor],
                 codebooks: int, frame: int, settle: int):
        self.chain, self.tokens, self.codebooks = chain, tokens, codebooks
        self.frame, self.settle = frame, settle
        self.samples = 0
        self.rows = 1  # the batch pushed (finish's empty tokens have as many rows)
        self.finished = False

    def key(self) -> tuple:
        """Streams with equal keys hold states of the same shapes (push_together)."""
        return min(self.samples, self.settle), self.samples % self.frame

    @staticmethod
    def push_together(streams: list[EncoderStream], audio: torch.Tensor
                      ) -> list[tuple[EncoderStream, torch.Tensor]]:
        """(streams[i] advanced by audio[i : i + 1], its tokens) for every i, run as one batch
        (equal keys); the given streams are left as they were."""
        news, tokens = _together(streams, lambda batch: batch._run(audio))
        for new in news:
            new.samples += audio.shape[-1]
        return [(new, tokens[i : i + 1]) for i, new in enumerate(news)]

    def copy(self) -> EncoderStream:
        other = copy.copy(self)
        other.chain = stack([self.chain])
        return other

    def push(self, audio: torch.Tensor) -> torch.Tensor:
        """Tokens int64 [B, K, t] for audio [B, C, n]: the frames now final."""
        if self.finished:
            raise RuntimeError("the stream has finished")
        self.samples += audio.shape[-1]
        self.rows = audio.shape[0]
        return self._run(audio)

    def finish(self) -> torch.Tensor:
        """The tokens of the rest (the last partial frame, completed by the end's padding)."""
        if self.finished:
            raise RuntimeError("the stream has finished")
        self.finished = True
        return self._codes(self.chain.flush(), self.rows)

    def _run(self, audio: torch.Tensor) -> torch.Tensor:
        return self._codes(self.chain.push(audio) if audio.shape[-1] else None, audio.shape[0])

    def _codes(self, latents: torch.Tensor | None, batch: int) -> torch.Tensor:
        if latents is None or latents.shape[-1] == 0:
            return torch.zeros(batch, self.codebooks, 0, dtype=torch.long)
        return self.tokens(latents)


def _together(streams: list, run: Callable) -> tuple[list, torch.Tensor | None]:
    """Copies of `streams` advanced as one batch by `run(batch stream)` (their chains stacked,
    run once, split by rows), and run's output."""
    batch = copy.copy(streams[0])
    batch.chain = stack([s.chain for s in streams])
    out = run(batch)
    news = []
    for i, s in enumerate(streams):
        new = copy.copy(s)
        new.chain = row(batch.chain, i) if len(streams) > 1 else batch.chain
        news.append(new)
    return news, out
