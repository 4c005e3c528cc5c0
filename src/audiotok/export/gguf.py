"""Writing GGUF files: typed metadata and tensors, atomically. A family's exporter (in its
models/<family>/ folder) builds what goes in."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..fileio import atomic_output


def write_gguf(out: str | os.PathLike, arch: str, metadata: dict[str, tuple[str, object]],
               tensors: dict[str, np.ndarray | torch.Tensor]) -> Path:
    """A GGUF file of `arch` with typed metadata (see gguf_metadata) and tensors in torch
    order, written atomically."""
    import gguf

    out = Path(out)
    with atomic_output(out) as tmp:
        w = gguf.GGUFWriter(str(tmp), arch)
        for key, (kind, value) in metadata.items():
            _add(w, key, kind, value)
        for name, t in tensors.items():
            t = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t
            w.add_tensor(name, np.ascontiguousarray(t))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return out


def _add(w, key: str, kind: str, value) -> None:
    if kind == "u32":
        w.add_uint32(key, int(value))
    elif kind == "i32":
        w.add_int32(key, int(value))
    elif kind == "f32":
        w.add_float32(key, float(value))
    elif kind == "str":
        w.add_string(key, value)
    elif kind == "ints":
        w.add_array(key, [int(v) for v in value])
    else:
        raise ValueError(kind)
