"""Slots: the layer states (nn/streaming.py) of many streams of one model, one row each, so that
any subset of streams runs as one batch.

A step gathers the rows of the streams it runs into the modules' states (with a Ragged telling
each module how many frames of each row are real), runs the model once, and scatters the new
rows back. Modules replace their state tensors, or write into them only where the state holds
nothing it will read (a transformer's KV ring), so a run of consecutive slots is passed as
views of the rows (no gather copy; a tensor written in place needs no copy back), a step over
every slot passes the states themselves, and a step that fails leaves the rows meaning what
they meant. A released slot is zeroed, which is the state of a new stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

from ..nn.streaming import LayerState, Ragged, streaming_modules


class SlotTable:
    """`capacity` slots over the streaming modules that `roots(model)` returns (the model: a
    stream copy the caller owns)."""

    def __init__(self, model: nn.Module, roots: Callable[[nn.Module], list[nn.Module]],
                 capacity: int, device: torch.device):
        self.model = model
        self.modules = streaming_modules(*roots(model))
        self.capacity = capacity
        self.device = device
        self.rows: list[LayerState] = [m.new_state(capacity, device) for m in self.modules]
        self.free = list(range(capacity - 1, -1, -1))  # pop() gives the lowest slot

    @property
    def in_use(self) -> int:
        return self.capacity - len(self.free)

    def acquire(self) -> int | None:
        """A free slot (its rows are a new stream's state), or None when all are taken."""
        return self.free.pop() if self.free else None

    def release(self, slot: int) -> None:
        with torch.inference_mode():  # (a step's new state tensors are inference tensors)
            for rows in self.rows:
                for t in rows.tensors():
                    t[slot].zero_()
        self.free.append(slot)
        self.free.sort(reverse=True)

    def leaves(self) -> list[torch.Tensor]:
        """Every state tensor of every slot (CUDA graphs keep them in place)."""
        return [t for rows in self.rows for t in rows.tensors()]

    @contextlib.contextmanager
    def step(self, slots: list[int], frames: list[int], total: int) -> Iterator[nn.Module]:
        """Run the model (yielded) on the rows of `slots`, row i holding frames[i] real frames of
        `total`; the new rows are kept only when the block ends without an error."""
        ragged = None
        if any(n != total for n in frames):
            ragged = Ragged(torch.tensor(frames, device=self.device), total)
        every = slots == list(range(self.capacity))
        take, put = (None, None) if every else self._rows_of(slots)
        for m, rows in zip(self.modules, self.rows, strict=True):
            # (every row: the states themselves, in new containers, so that a failed step's
            # field assignments do not reach them)
            m.set_stream(True, rows.copy() if every else rows.mapped(take), ragged)
        try:
            yield self.model
            for i, m in enumerate(self.modules):
                if every:
                    self.rows[i] = m.state
                else:
                    for old, new in zip(self.rows[i].tensors(), m.state.tensors(), strict=True):
                        put(old, new)
        finally:
            for m in self.modules:
                m.set_stream(False)

    def _rows_of(self, slots: list[int]) -> tuple[Callable, Callable]:
        """take(rows) -> the rows of `slots`; put(rows, new) writes new rows back. A run of
        consecutive slots is taken as a view (no gather copy)."""
        first, n = slots[0], len(slots)
        if slots == list(range(first, first + n)):
            def put(old: torch.Tensor, new: torch.Tensor) -> None:
                rows = old.narrow(0, first, n)
                if new.data_ptr() != rows.data_ptr() or new.stride() != rows.stride():
                    rows.copy_(new)  # (else: the rows themselves, written in place)

            return lambda t: t.narrow(0, first, n), put
        index = torch.tensor(slots, device=self.device)
        return (lambda t: t.index_select(0, index),
                lambda old, new: old.index_copy_(0, index, new.to(old.dtype)))
