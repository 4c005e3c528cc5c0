"""SNAC checkpoints -> (canonical state dict, config).

The hub repositories (`hubertsiuzdak/snac_*`) hold `pytorch_model.bin` (the `snac` package's
state dict: weight norm as `parametrizations.weight.original0/1`, or `weight_g`/`weight_v` in
older saves) and `config.json` (the `SNAC(...)` arguments); audiotok's `save_pretrained` writes
model.safetensors and a config.json naming the codec. Weight norm is folded; the attention's
`rel_pos.inv_freq` buffer (a fixed formula, recomputed) is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ...checkpoint import fold_weight_norm, read_json, read_weights, weights_file
from ...errors import CheckpointError
from .config import SnacConfig

_FILES = ("pytorch_model.bin", "model.safetensors")
_DROPPED = re.compile(r"\.rel_pos\.(inv_freq|scale)$")


def checkpoint_file(path: Path) -> Path:
    """The weights file of a checkpoint path (a file, or a folder holding one)."""
    return weights_file(path, _FILES, "SNAC weights",
                        f"{' or '.join(_FILES)} beside a config.json")


def load_checkpoint(path: Path, config: SnacConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], SnacConfig]:
    """(canonical state dict, config) of a SNAC weights file; `config` overrides the
    config.json beside it, which is needed otherwise (rates cannot be read from tensors)."""
    sd = read_weights(path)
    if not any(k.startswith("quantizer.quantizers.") for k in sd):
        raise CheckpointError(f"{path}: not a SNAC checkpoint (no quantizer.quantizers.* "
                              "tensors)")
    if config is None:
        meta = read_json(path.with_name("config.json"))
        if not meta:
            raise CheckpointError(f"{path}: a SNAC checkpoint needs its config.json beside it "
                                  "(the hub repository's, with the model's rates)")
        config = SnacConfig.from_dict(meta)
    sd = fold_weight_norm({k: v for k, v in sd.items() if not _DROPPED.search(k)})
    return sd, config
