"""A SlotTable's steps replayed as CUDA graphs (nn/cuda_graphs.py's GraphCache, with its eager
fallback for a shape that cannot be captured).

A graph needs fixed shapes and a pure function, so a step gathers its rows into new tensors,
pads the batch with zero rows (a new stream's state) and the frames with zeros, each up to a
size in BUCKETS, and runs `(input, frames per row, *state rows) -> (output, *new state rows)`,
one graph per (batch, frames) bucket. Every row is passed as ragged (each keeps its state at
its last real frame, and being causal the padding never reaches a real output), so one graph
serves any mix of frame counts. The padding is dropped, and the real rows are written back
only when the step succeeded (a failed step leaves them as they were). The graphs share one
memory pool and their input buffers (steps run one at a time and their outputs are copied out
at once).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..nn.cuda_graphs import GraphCache, Output, shared_capture
from ..nn.streaming import Ragged
from .slots import SlotTable

# batch sizes and frame counts a graphed step is padded to (beyond the last one: its
# multiples), so that a few graphs serve every number of streams and frames
BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
    """`call(model, x)` runs the model; `steps_of(x)` is x's length in frames; `max_frames`:
    the most frames of a step (with the table's capacity, the number of graphs kept);
    `capture` replaces the CUDA capture (tests)."""

    def __init__(self, table: SlotTable, call: Callable[[nn.Module, torch.Tensor], torch.Tensor],
                 steps_of: Callable[[torch.Tensor], int], max_frames: int, capture=None):
        self.table = table
        self.call = call
        self.steps_of = steps_of
        shapes = len(bucket_sizes(table.capacity)) * len(bucket_sizes(max_frames))
        self.graphs = GraphCache(self._pure, shapes, capture or shared_capture())

    def _pure(self, x: torch.Tensor, frames: torch.Tensor, *leaves: torch.Tensor) -> Output:
        t = self.table
        it = iter(leaves)
        ragged = Ragged(frames, self.steps_of(x))
        for m, rows in zip(t.modules, t.rows, strict=True):
            m.set_stream(True, rows.rebuilt(it), ragged)
        try:
            y = self.call(t.model, x)
            return (y, *(new for m in t.modules for new in m.state.tensors()))
        finally:
            for m in t.modules:
                m.set_stream(False)

    def run(self, slots: list[int], frames: list[int], x: torch.Tensor) -> torch.Tensor:
        """The output of the rows of `slots` for input x [len(slots), ...] (row i holding
        frames[i] real frames of x's length), as long as the padded step's; their new state is
        kept on success."""
        t = self.table
        n = len(slots)
        pad = bucket(n) - n
        index = torch.tensor(slots, device=t.device)
        kept = t.leaves()
        leaves = [torch.cat([o.index_select(0, index), o.new_zeros(pad, *o.shape[1:])])
                  for o in kept]
        total = self.steps_of(x)
        per = x.shape[-1] // total  # input steps per frame
        x = F.pad(x, (0, (bucket(total) - total) * per))  # frames, then rows
        x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])])
        lengths = torch.tensor(frames + [total] * pad, device=t.device)
        y, *new = self.graphs(x, lengths, *leaves)
        for o, nw in zip(kept, new, strict=True):
            o.index_copy_(0, index, nw[:n].to(o.dtype))
        return y[:n]
