"""Tensors derived from a parameter or buffer once and reused (a transposed convolution's
polyphase weight, a codebook prepared for nearest-code search).

The cache is keyed by the source tensor's identity and checked against its storage, version,
dtype and device, so loading new weights or moving the model derives again; an entry goes when
its source does. It lives outside the modules, so stream copies of a model share it.
While a graph is traced for export the value is derived in the graph from the source itself."""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch

from ..tracing import exporting

_CACHE: dict[tuple[int, str], tuple] = {}  # (id(source), tag) -> (weakref, key, derived)


def derived(source: torch.Tensor, tag: str, make: Callable[[torch.Tensor], torch.Tensor]
            ) -> torch.Tensor:
    """make(source), computed once per state of `source` (under no_grad)."""
    if exporting():
        return make(source)
    try:
        version = source._version
    except RuntimeError:  # an inference tensor has no version counter
        version = -1
    key = (version, source.data_ptr(), source.dtype, source.device)
    slot = (id(source), tag)
    cached = _CACHE.get(slot)
    if cached is not None and cached[0]() is source and cached[1] == key:
        return cached[2]
    with torch.no_grad():
        value = make(source)
    if cached is None or cached[0]() is not source:
        weakref.finalize(source, _CACHE.pop, slot, None)
    _CACHE[slot] = (weakref.ref(source), key, value)
    return value
