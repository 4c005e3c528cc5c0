"""Slots: the streaming state of many streams of one model, one row each, so that any subset of
streams runs as one batch.

A step gathers the rows of the streams it runs into the modules' `stream` dicts (with a Ragged
telling each module how many frames of each row are real), runs the model once, and scatters
the new rows back. Modules replace their state tensors and never write into them, so a run of
consecutive slots is passed as views of the rows (no gather copy), and a step that fails leaves
the rows as they were. A released slot is zeroed, which is the state of a new stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

from ..nn.streaming import Ragged, stream_copy, streaming_modules


def _map(tree, fn: Callable[[torch.Tensor], torch.Tensor]):
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: _map(v, fn) for k, v in tree.items()}
    return [_map(v, fn) for v in tree]


def _pairs(rows, new) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    if isinstance(rows, torch.Tensor):
        yield rows, new
    elif isinstance(rows, dict):
        for k, v in rows.items():
            yield from _pairs(v, new[k])
    else:
        for a, b in zip(rows, new, strict=True):
            yield from _pairs(a, b)


class SlotTable:
    """`capacity` slots over the streaming modules that `roots(model)` returns, on a copy of
    `model` that shares its weights."""

    def __init__(self, model: nn.Module, roots: Callable[[nn.Module], list[nn.Module]],
                 capacity: int, device: torch.device):
        self.model = stream_copy(model)
        self.modules = streaming_modules(*roots(self.model))
        self.capacity = capacity
        self.device = device
        self.rows = [m.initial_state(capacity, device) for m in self.modules]
        self.free = list(range(capacity - 1, -1, -1))  # pop() gives the lowest slot

    @property
    def in_use(self) -> int:
        return self.capacity - len(self.free)

    def acquire(self) -> int | None:
        """A free slot (its rows are a new stream's state), or None when all are taken."""
        return self.free.pop() if self.free else None

    def release(self, slot: int) -> None:
        for rows in self.rows:
            for t, _ in _pairs(rows, rows):
                t[slot].zero_()
        self.free.append(slot)
        self.free.sort(reverse=True)

    def _rows_of(self, slots: list[int]) -> tuple[Callable, Callable]:
        """take(rows) -> the rows of `slots`; put(rows, new) writes new rows back. A run of
        consecutive slots is taken as a view (no gather copy)."""
        first, n = slots[0], len(slots)
        if slots == list(range(first, first + n)):
            return (lambda t: t.narrow(0, first, n),
                    lambda old, new: old.narrow(0, first, n).copy_(new))
        index = torch.tensor(slots, device=self.device)
        return (lambda t: t.index_select(0, index),
                lambda old, new: old.index_copy_(0, index, new.to(old.dtype)))

    @contextlib.contextmanager
    def step(self, slots: list[int], frames: list[int], total: int) -> Iterator[nn.Module]:
        """Run the model (yielded) on the rows of `slots`, row i holding frames[i] real frames of
        `total`; the new rows are kept only when the block ends without an error."""
        take, put = self._rows_of(slots)
        ragged = None
        if any(n != total for n in frames):
            ragged = Ragged(torch.tensor(frames, device=self.device), total)
        for m, rows in zip(self.modules, self.rows, strict=True):
            m.stream = {**_map(rows, take), "ragged": ragged}
        try:
            yield self.model
            for m, rows in zip(self.modules, self.rows, strict=True):
                for old, new in _pairs(rows, m.stream):
                    put(old, new)
        finally:
            for m in self.modules:
                m.stream = None
