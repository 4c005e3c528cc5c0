"""Slots: the streaming state of many streams of one model, one row each, so that any subset of
streams runs as one batch.

A step gathers the rows of the streams it runs into the modules' `stream` dicts (with a Ragged
telling each module how many frames of each row are real), runs the model once, and scatters
the new rows back. Modules replace their state tensors, or write into them only where the state
holds nothing it will read (a transformer's KV ring, nn/transformer.py), so a run of
consecutive slots is passed as views of the rows (no gather copy; a tensor written in place
needs no copy back), and a step that fails leaves the rows meaning what they meant. A released
slot is zeroed, which is the state of a new stream.

On a GPU with CUDA graphs, GraphedSteps replays each step as a graph instead (below).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..nn.cuda_graphs import GraphCache, Output, shared_capture
from ..nn.streaming import Ragged, stream_copy, streaming_modules

# batch sizes and frame counts a graphed step is padded to (beyond the last one: its
# multiples), so that a few graphs serve every number of streams and frames
BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
            def put(old: torch.Tensor, new: torch.Tensor) -> None:
                rows = old.narrow(0, first, n)
                if new.data_ptr() != rows.data_ptr() or new.stride() != rows.stride():
                    rows.copy_(new)  # (else: the rows themselves, written in place)

            return lambda t: t.narrow(0, first, n), put
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


def bucket(n: int) -> int:
    """The size a graphed step of n rows (or frames) is padded to."""
    for b in BUCKETS:
        if n <= b:
            return b
    return -(-n // BUCKETS[-1]) * BUCKETS[-1]


def bucket_sizes(n: int) -> list[int]:
    """Sizes 1..n, one for each bucket they pad to (the sizes that reach every graph)."""
    return sorted({min(bucket(k), n) for k in range(1, n + 1)})


class GraphedSteps:
    """A SlotTable's steps replayed as CUDA graphs (nn/cuda_graphs.py's GraphCache, with its
    eager fallback for a shape that cannot be captured).

    A graph needs fixed shapes and a pure function, so a step gathers its rows into new tensors,
    pads the batch with zero rows (a new stream's state) and the frames with zeros, each up to
    a size in BUCKETS, and runs `(input, frames per row, *state rows) -> (output, *new state
    rows)`, one graph per (batch, frames) bucket. Every row is passed as ragged (each keeps its
    state at its last real frame, and being causal the padding never reaches a real output), so
    one graph serves any mix of frame counts. The padding is dropped, and the real rows are
    written back only when the step succeeded (a failed step leaves them as they were). The
    graphs share one memory pool and their input buffers (steps run one at a time and their
    outputs are copied out at once). `call(model, x)` runs the model; `steps_of(x)` is x's
    length in frames; `max_frames`: the most frames of a step (with the table's capacity, the
    number of graphs kept); `capture` replaces the CUDA capture (tests)."""

    def __init__(self, table: SlotTable, call: Callable[[nn.Module, torch.Tensor], torch.Tensor],
                 steps_of: Callable[[torch.Tensor], int], max_frames: int, capture=None):
        self.table = table
        self.call = call
        self.steps_of = steps_of
        self.leaves = [o for rows in table.rows for o, _ in _pairs(rows, rows)]  # kept in place
        shapes = len(bucket_sizes(table.capacity)) * len(bucket_sizes(max_frames))
        self.graphs = GraphCache(self._pure, shapes, capture or shared_capture())

    def _pure(self, x: torch.Tensor, frames: torch.Tensor, *leaves: torch.Tensor) -> Output:
        t = self.table
        it = iter(leaves)
        ragged = Ragged(frames, self.steps_of(x))
        for m, rows in zip(t.modules, t.rows, strict=True):
            m.stream = {**_map(rows, lambda _: next(it)), "ragged": ragged}
        try:
            y = self.call(t.model, x)
            return (y, *(new for m, rows in zip(t.modules, t.rows, strict=True)
                         for _, new in _pairs(rows, m.stream)))
        finally:
            for m in t.modules:
                m.stream = None

    def run(self, slots: list[int], frames: list[int], x: torch.Tensor) -> torch.Tensor:
        """The output of the rows of `slots` for input x [len(slots), ...] (row i holding
        frames[i] real frames of x's length), as long as the padded step's; their new state is
        kept on success."""
        t = self.table
        n = len(slots)
        pad = bucket(n) - n
        index = torch.tensor(slots, device=t.device)
        leaves = [torch.cat([o.index_select(0, index), o.new_zeros(pad, *o.shape[1:])])
                  for o in self.leaves]
        total = self.steps_of(x)
        per = x.shape[-1] // total  # input steps per frame
        x = F.pad(x, (0, (bucket(total) - total) * per))  # frames, then rows
        x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])])
        lengths = torch.tensor(frames + [total] * pad, device=t.device)
        y, *new = self.graphs(x, lengths, *leaves)
        for o, nw in zip(self.leaves, new, strict=True):
            o.index_copy_(0, index, nw[:n].to(o.dtype))
        return y[:n]
