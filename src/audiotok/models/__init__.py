"""The codec families and how a checkpoint path is matched to one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from ..codec import Codec
from ..errors import CheckpointError
from ..hub import resolve
from .s2.codec import S2Codec

FAMILIES: dict[str, type[Codec]] = {"s2": S2Codec}


def detect_family(path: Path) -> str:
    """Which codec a checkpoint file or directory holds."""
    config = path / "config.json" if path.is_dir() else path.with_name("config.json")
    if path.is_dir() or path.suffix == ".safetensors":
        if config.exists():
            try:
                d = json.loads(config.read_text())
            except (OSError, ValueError) as e:
                raise CheckpointError(f"{config}: unreadable JSON ({e})") from None
            if isinstance(d, dict) and d.get("codec") in FAMILIES:
                return d["codec"]
    return "s2"


def load(name_or_path: str | os.PathLike, *, device=None, dtype: torch.dtype = torch.float32,
         config=None) -> Codec:
    """Load a codec by name (e.g. "s2-pro", fetched from the Hugging Face Hub) or from a local
    checkpoint file or directory. `config` overrides the configuration found in the files."""
    path, preset = resolve(name_or_path)
    family = preset.codec if preset else detect_family(path)
    codec = FAMILIES[family].from_checkpoint(path, config, device=device, dtype=dtype)
    codec.announce_licence()
    return codec
