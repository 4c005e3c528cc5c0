"""Graph export mode: while a model is traced for export (ONNX), layers take forms whose shape
does not depend on the input length or on Python-side caches (banded attention instead of a loop
over blocks, plain convolutions instead of the CPU fast paths picked by size, weights derived in
the graph instead of cached by pointer). The numbers are the same within float rounding."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_EXPORTING = contextvars.ContextVar("audiotok_graph_export", default=False)


@contextlib.contextmanager
def graph_export() -> Iterator[None]:
    token = _EXPORTING.set(True)
    try:
        yield
    finally:
        _EXPORTING.reset(token)


def exporting() -> bool:
    return _EXPORTING.get()
