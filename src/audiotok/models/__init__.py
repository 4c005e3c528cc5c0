"""The codec families and how a checkpoint path is matched to one."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors import safe_open

from ..checkpoint import read_json
from ..codec import Codec
from ..errors import CheckpointError
from ..hub import resolve
from ..nn.precision import parse_dtype
from .s2.codec import S2Codec
from .xcodec2.codec import XCodec2Codec
from .xcodec2.weights import layout_of

FAMILIES: dict[str, type[Codec]] = {"s2": S2Codec, "xcodec2": XCodec2Codec}


def detect_family(path: Path) -> str:
    """Which codec a checkpoint file or directory holds: from our config.json, a transformers
    config.json, or the tensor names of a safetensors file; torch and GGUF files are S2."""
    weights = path / "model.safetensors" if path.is_dir() else path
    d = read_json(weights.with_name("config.json")) or {}
    if d.get("codec") in FAMILIES:
        return d["codec"]
    if d.get("model_type") == "xcodec2":
        return "xcodec2"
    if weights.suffix == ".safetensors" and weights.is_file():
        try:
            with safe_open(str(weights), "pt") as f:
                keys = list(f.keys())
        except Exception as e:
            raise CheckpointError(f"{weights}: cannot read safetensors file ({e})") from None
        if layout_of(keys):
            return "xcodec2"
    return "s2"


def load(name_or_path: str | os.PathLike, *, device=None,
         dtype: torch.dtype | str = torch.float32,
         config=None, codec: str | None = None, cuda_graphs: bool = False) -> Codec:
    """Load a codec by name ("s2-pro", "xcodec2", "xcodec2-hf": fetched from the Hugging Face
    Hub) or from a local checkpoint file or directory.

    config: overrides the configuration found in the files. codec: "s2" or "xcodec2", to skip
    detection (a checkpoint of the other codec is then an error). cuda_graphs: on a CUDA
    device, replay encode/decode calls as CUDA graphs cached per input shape (no effect
    elsewhere; see nn/cuda_graphs.py). dtype: a torch dtype or its name ("bfloat16").
    """
    if isinstance(dtype, str):
        dtype = parse_dtype(dtype)
    path, preset = resolve(name_or_path)
    family = preset.codec if preset else detect_family(path)
    if codec is not None:
        if codec not in FAMILIES:
            raise ValueError(f"unknown codec {codec!r}; expected one of {sorted(FAMILIES)}")
        if codec != family:
            raise CheckpointError(f"{path} holds {FAMILIES[family].title} weights, not "
                                  f"{FAMILIES[codec].title} weights")
    result = FAMILIES[family].from_checkpoint(path, config, device=device, dtype=dtype,
                                              cuda_graphs=cuda_graphs)
    result.announce_licence()
    return result
