"""Loading a codec: a name (models.registry's presets) or a local checkpoint, matched to its
family (models/<family>/__init__.py declares each; models/family.py says what a family is)."""

from __future__ import annotations

import os

from ..errors import CheckpointError
from .registry import DEFAULT_MODEL, FAMILIES, detect_family, family

__all__ = ["DEFAULT_MODEL", "FAMILIES", "detect_family", "family", "load"]


def load(name_or_path: str | os.PathLike, *, device=None, dtype="float32", config=None,
         codec: str | None = None, cuda_graphs: bool = False):
    """Load a codec by name (e.g. "s2-pro", "xcodec2", "xcodec2-hf": fetched from the Hugging
    Face Hub) or from a local checkpoint file or directory.

    config: overrides the configuration found in the files. codec: a family name ("s2",
    "xcodec2", ...) to skip detection (a checkpoint of another codec is then an error).
    cuda_graphs: on a CUDA device, replay encode/decode calls as CUDA graphs cached per input
    shape (no effect elsewhere; see nn/cuda_graphs.py). dtype: a torch dtype or its name
    ("bfloat16").
    """
    from ..hub import resolve
    from ..nn.precision import parse_dtype

    if isinstance(dtype, str):
        dtype = parse_dtype(dtype)
    path, preset = resolve(name_or_path)
    found = family(preset.family) if preset else None
    if codec is not None:
        wanted = family(codec)
        found = found or _detect_or_none(path)
        if found is not None and found is not wanted:
            raise CheckpointError(f"{path} holds {found.title} weights, not {wanted.title} "
                                  "weights")
        found = wanted
    found = found or detect_family(path)
    result = found.codec_class().from_checkpoint(path, config, device=device, dtype=dtype,
                                                 cuda_graphs=cuda_graphs)
    result.announce_licence()
    return result


def _detect_or_none(path):
    try:
        return detect_family(path)
    except CheckpointError:
        return None
