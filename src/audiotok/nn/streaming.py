"""Streaming state carried by layers between calls.

While a StreamingModule streams (inside `with streaming(module, ...)`, or a step of the rows of
many streams: streaming/layers.py), it keeps what it needs from earlier calls in `state`, a
typed LayerState (a conv's left context, a transformer's positions and key/value rings), so
feeding a signal in consecutive pieces gives the output of feeding it whole. Outside, the
modules are stateless.

Every state tensor has the batch as its first dimension and a fixed size (zeros before the
first call, as `new_state` makes them), so the rows of many streams can be gathered into one
batch and scattered back. A call replaces its state tensors, or writes into them only where
they hold nothing the state reads (so a call that fails, or one made twice on the same state,
leaves the state meaning the same). Rows in one call may carry different numbers of valid
frames: the batch is right-padded to the longest, and the module's `ragged` tells it where
each row's valid input ends, so it keeps the state as of that point. Being causal, padding
never reaches a valid output.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace

import torch
from torch import nn

from .tracing import exporting


@dataclass(frozen=True)
class Ragged:
    """Rows padded to `total` frames of which row b has `frames[b]` valid (frames: long [B],
    on the model's device). A module whose input has r steps per frame reads `valid(length)`."""

    frames: torch.Tensor
    total: int

    def valid(self, length: int) -> torch.Tensor:
        """Valid steps per row of an input `length` steps long (a multiple of `total`)."""
        return self.frames * (length // self.total)


@dataclass
class LayerState:
    """A streaming layer's state: batch-first tensors, the same structure whatever the batch.
    A field holds a tensor, None, a LayerState, or a list of tensors or LayerStates."""

    def named_tensors(self) -> list[tuple[str, torch.Tensor]]:
        """(dotted name, tensor) of every state tensor, in field order ("layers.0.k")."""
        out: list = []
        _walk(self, "", out)
        return out

    def tensors(self) -> list[torch.Tensor]:
        """Every state tensor, in named_tensors()' order."""
        out: list = []
        _walk(self, None, out)
        return out

    def copy(self) -> LayerState:
        """A new container of the same tensors (nested states and lists new too), so that a
        call that assigns its fields leaves this one as it was."""
        new = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, LayerState):
                setattr(new, name, value.copy())
            elif isinstance(value, list):
                setattr(new, name, [v.copy() if isinstance(v, LayerState) else v for v in value])
        return new

    def mapped(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> LayerState:
        """A state of the same structure whose tensors are fn(each tensor)."""
        return self.rebuilt(fn(t) for t in self.tensors())

    def rebuilt(self, tensors) -> LayerState:
        """A state of the same structure holding `tensors` (in tensors()' order)."""
        it = iter(tensors)
        return _rebuild(self, it)


def _walk(value, name: str | None, out: list) -> None:
    """Append every tensor under `value` in field order: as (dotted name, tensor), or alone
    when `name` is None (no names built: a streaming step walks the states every call)."""
    if isinstance(value, torch.Tensor):
        out.append(value if name is None else (name, value))
        return
    if isinstance(value, LayerState):
        children = vars(value).items()
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return
    for key, child in children:
        _walk(child, None if name is None else f"{name}.{key}" if name else str(key), out)


def _rebuild(value, it):
    if isinstance(value, torch.Tensor):
        return next(it)
    if isinstance(value, LayerState):
        return replace(value, **{f.name: _rebuild(getattr(value, f.name), it)
                                 for f in fields(value)})
    if isinstance(value, list):
        return [_rebuild(v, it) for v in value]
    return value


class StreamingModule(nn.Module):
    """A layer that streams: `new_state(batch, device)` gives a new stream's state; while
    `streaming` is set, forward reads and advances `state` (made on first use), and `ragged`
    (None: every row valid) tells it each row's valid input."""

    def __init__(self):
        super().__init__()
        self.streaming = False
        self.state: LayerState | None = None
        self.ragged: Ragged | None = None

    def new_state(self, batch: int, device: torch.device) -> LayerState:
        """The state before the first call, for `batch` rows."""
        raise NotImplementedError

    def set_stream(self, streaming: bool, state: LayerState | None = None,
                   ragged: Ragged | None = None) -> None:
        """Start or end streaming with `state` (plain attributes, set without nn.Module's
        checks: a step sets them on every streaming module)."""
        object.__setattr__(self, "streaming", streaming)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "ragged", ragged)

    def current_state(self, batch: int, device: torch.device) -> LayerState:
        """The state of this stream (a new one on the first call)."""
        if self.state is None:
            self.state = self.new_state(batch, device)
        return self.state


def keep_last(x: torch.Tensor, size: int, end: torch.Tensor | None, dim: int = -1
              ) -> torch.Tensor:
    """The `size` steps of x along `dim` that end at `end` (per row, [B]), or at x's end when
    `end` is None. A view of x when that keeps at most twice what is needed alive (a KV cache
    keeps all but the newest step of its concatenation: a copy would cost as much again), else
    a new tensor. A view is safe: state is written in place only where it holds nothing that
    is read (nn/transformer.py's KV ring)."""
    length = x.shape[dim]
    if end is None:
        last = x.narrow(dim, length - size, size)
        # (traced for export: no test of a traced length, which would fix it; a graph's
        # outputs are its own tensors anyway)
        return last if exporting() or length <= 2 * size else last.clone()
    dim = dim % x.ndim
    index = end[:, None] - size + torch.arange(size, device=x.device)  # [B, size]
    shape = [x.shape[0]] + [1] * (x.ndim - 1)
    shape[dim] = size
    index = index.view(shape).expand(*x.shape[:dim], size, *x.shape[dim + 1:])
    return torch.gather(x, dim, index)


def streaming_modules(*roots: nn.Module) -> list[StreamingModule]:
    return [m for root in roots for m in root.modules() if isinstance(m, StreamingModule)]


@contextlib.contextmanager
def streaming(*roots: nn.Module) -> Iterator[None]:
    """Give every StreamingModule under `roots` a fresh state; drop it on exit."""
    modules = streaming_modules(*roots)
    if any(m.streaming for m in modules):
        raise RuntimeError("these modules are already streaming; close the other stream first")
    for m in modules:
        m.set_stream(True)
    try:
        yield
    finally:
        for m in modules:
            m.set_stream(False)


def stream_copy(module: nn.Module) -> nn.Module:
    """A copy of `module` that shares its parameters and buffers but has its own streaming
    state, so several streams (and offline calls) can run on one model."""
    memo = {id(t): t for t in (*module.parameters(), *module.buffers())}
    return copy.deepcopy(module, memo)


class StreamCopies:
    """stream_copy(module)s kept for reuse, at most `keep` of them: `streamed()` lends one in
    streaming mode. Copying the module tree takes tens of milliseconds (every submodule is
    deep-copied), which each long offline call that streams its input in pieces would pay."""

    def __init__(self, module: nn.Module, keep: int = 4):
        self.module, self.keep = module, keep
        self._free: list[nn.Module] = []
        self._lock = threading.Lock()

    def take(self) -> nn.Module:
        """A copy no one else holds, not streaming. A kept copy whose buffers are no longer the
        module's (`module.to(...)` replaces buffers, while parameters keep their objects) is
        dropped."""
        with self._lock:
            while self._free:
                model = self._free.pop()
                if all(a is b for a, b in zip(model.buffers(), self.module.buffers(),
                                              strict=True)):
                    return model
        return stream_copy(self.module)

    def give(self, model: nn.Module) -> None:
        """Return a copy taken, once its streaming has ended."""
        with self._lock:
            if len(self._free) < self.keep:
                self._free.append(model)

    @contextlib.contextmanager
    def streamed(self) -> Iterator[nn.Module]:
        model = self.take()
        with streaming(model):
            yield model
        self.give(model)  # (not after an error: a copy whose step failed is dropped)
