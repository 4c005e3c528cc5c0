"""Streaming state carried by modules between calls.

Inside `with streaming(module, ...)`, every StreamingModule below the given modules keeps what
it needs from earlier calls (a conv's left context, a transformer's KV cache and position), so
feeding a signal in consecutive pieces gives the output of feeding it whole. Outside, the
modules are stateless. The state lives in `module.stream` (a dict, None when not streaming).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

from torch import nn


class StreamingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream: dict | None = None


@contextlib.contextmanager
def streaming(*roots: nn.Module) -> Iterator[None]:
    """Give every StreamingModule under `roots` a fresh state; drop it on exit."""
    modules = [m for root in roots for m in root.modules() if isinstance(m, StreamingModule)]
    if any(m.stream is not None for m in modules):
        raise RuntimeError("these modules are already streaming; close the other stream first")
    for m in modules:
        m.stream = {}
    try:
        yield
    finally:
        for m in modules:
            m.stream = None


def stream_copy(module: nn.Module) -> nn.Module:
    """A copy of `module` that shares its parameters and buffers but has its own streaming
    state, so several streams (and offline calls) can run on one model."""
    memo = {id(t): t for t in (*module.parameters(), *module.buffers())}
    return copy.deepcopy(module, memo)
