"""Export to other runtimes: ONNX graphs (`export_onnx`, `OnnxSettings`), the formats codec
families add (`export_as`, e.g. a codec GGUF for s2.cpp), and language-model token ids
(`audiotok.export.llm`). Importing this package imports no torch."""

from __future__ import annotations

import os
from pathlib import Path


def export_as(codec, fmt: str, out: str | os.PathLike, dtype: str | None = None) -> Path:
    """Write `codec` in a format its family exports (Family.exporters) at `out`."""
    from ..errors import AudiotokError
    from ..models.registry import export_formats

    exporter = codec.family.exporters.get(fmt)
    if exporter is None:
        formats = ", ".join(codec.family.export_formats()) or "none"
        owners = ", ".join(f.title for f in export_formats().get(fmt, [])) or "no codec"
        raise AudiotokError(f"{codec.title} has no {fmt} export (its formats: {formats}); "
                            f"{fmt} export is for {owners}")
    dtype = dtype or exporter.dtypes[0]
    if dtype not in exporter.dtypes:
        raise AudiotokError(f"{fmt} export takes --dtype {' or '.join(exporter.dtypes)}, not "
                            f"{dtype}")
    return codec.family.resolve(exporter.function)(codec, out, dtype)


def __getattr__(name: str):
    if name in ("export_onnx", "OnnxSettings"):
        from . import onnx

        return getattr(onnx, name)
    raise AttributeError(f"module 'audiotok.export' has no attribute {name!r}")


__all__ = ["OnnxSettings", "export_as", "export_onnx"]
