"""CUDA graphs of whole encode/decode calls (and of serving engine steps, streaming/graphs.py), one
per input shape.

On a GPU, a small batch spends most of its time launching hundreds of small kernels. A CUDA graph
records the kernels of one call and replays them with one launch. The kernels depend on the
input shapes, so a graph is captured per (batch, frames) shape and cached, the least recently
used dropped beyond `max_graphs` (each holds its own activation memory). A shape whose capture
fails (an operation that waits for the host, say) runs eagerly from then on and is not retried;
so does one whose replay does not reproduce the eager result.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

import torch

log = logging.getLogger("audiotok")

Output = torch.Tensor | tuple[torch.Tensor, ...]
Replay = Callable[..., Output]


def _clone(out: Output) -> Output:
    return out.clone() if isinstance(out, torch.Tensor) else tuple(t.clone() for t in out)


def _same(a: Output, b: Output) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b, strict=True)))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6))
    return bool(torch.equal(a, b))


def static_inputs(args: tuple[torch.Tensor, ...], buffers: dict | None
                  ) -> tuple[torch.Tensor, ...]:
    """Copies of args for a graph to read its inputs from. With `buffers` (shared by graphs
    that are replayed one at a time, each copying its inputs in first), an argument reuses the
    buffer of an earlier graph's argument at the same position with the same shape and dtype."""
    if buffers is None:
        return tuple(a.clone() for a in args)
    out = []
    for i, a in enumerate(args):
        key = (i, tuple(a.shape), a.dtype, a.device)
        if key not in buffers:
            buffers[key] = torch.empty_like(a)
        out.append(buffers[key].copy_(a))
    return tuple(out)


def capture_cuda(fn: Callable[..., Output], args: tuple[torch.Tensor, ...],
                 pool=None, buffers: dict | None = None) -> Replay:
    """Capture fn(*args) as a CUDA graph; returns replay(*new_args) -> fresh output tensors (a
    tensor, or a tuple of them when fn returns one). `pool`: a memory pool shared with other
    graphs, else the graph's own; `buffers`: input buffers shared with them (static_inputs;
    both from shared_capture).

    Warms up on a side stream first (allocations and library autotuning stay out of the graph),
    then checks that one replay gives the eager result."""
    static = static_inputs(args, buffers)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(*static)
        expected = _clone(fn(*static))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn(*static)

    def replay(*new: torch.Tensor) -> torch.Tensor:
        for s, a in zip(static, new, strict=True):
            s.copy_(a)
        graph.replay()
        return _clone(out)

    if not _same(replay(*args), expected):
        raise RuntimeError("the graph's replay differs from eager execution")
    return replay


def shared_capture() -> Callable[..., Replay]:
    """capture_cuda for graphs that share one memory pool and their input buffers: safe for
    graphs that are replayed one at a time and whose outputs are copied out at once (replay
    does), so that their activations take the memory of the largest graph, and inputs of one
    shape are held once, not once per graph."""
    pool, buffers = [], {}

    def capture(fn: Callable[..., Output], args: tuple[torch.Tensor, ...]) -> Replay:
        if not pool:
            pool.append(torch.cuda.graph_pool_handle())
        return capture_cuda(fn, args, pool=pool[0], buffers=buffers)

    return capture


class GraphCache:
    """fn(*tensors) through cached CUDA graphs, keyed by the inputs' shapes and dtypes."""

    def __init__(self, fn: Callable[..., Output], max_graphs: int = 8,
                 capture: Callable[..., Replay] = capture_cuda):
        self.fn = fn
        self.max_graphs = max_graphs
        self.capture = capture
        self.graphs: OrderedDict[tuple, Replay] = OrderedDict()
        self.failed: dict[tuple, str] = {}  # shape -> why it runs eagerly

    def __call__(self, *args: torch.Tensor) -> Output:
        key = tuple((tuple(a.shape), a.dtype) for a in args)
        if key in self.failed:
            return self.fn(*args)
        replay = self.graphs.get(key)
        if replay is None:
            try:
                replay = self.capture(self.fn, args)
            except Exception as e:  # any failure: this shape runs eagerly, as without graphs
                self.failed[key] = f"{type(e).__name__}: {e}"
                log.warning("audiotok: no CUDA graph for input shapes %s, running them eagerly "
                            "(%s)", [s for s, _ in key][:2], self.failed[key].splitlines()[0])
                return self.fn(*args)
            self.graphs[key] = replay
            if len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
        else:
            self.graphs.move_to_end(key)
        return replay(*args)
