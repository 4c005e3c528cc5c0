"""DAC checkpoints -> (canonical state dict, config).

Three layouts, told apart by tensor names: the `dac` package's `weights*.pth` (a dict of
"state_dict", weight norm as `weight_g`/`weight_v`, and "metadata" whose "kwargs" are the
model's arguments); transformers' `DacModel` (model.safetensors + config.json with
`model_type: "dac"`, flat names such as `encoder.block.0.res_unit1.conv1`, weight norm folded
or as parametrizations); and audiotok's own save (the package's names, folded). The canonical
layout is the package's names with weight norm folded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import torch

from ...checkpoint import (
    fold_weight_norm,
    read_json,
    read_safetensors,
    read_torch_object,
    weights_file,
)
from ...errors import CheckpointError
from . import layout_of
from .config import DacConfig


def checkpoint_file(path: Path) -> Path:
    """The weights file of a checkpoint path (a file, or a folder holding one)."""
    return weights_file(path, ("model.safetensors", "weights*.pth"),
                        "DAC weights", "model.safetensors beside a config.json, or the dac "
                        "package's weights*.pth")


def load_checkpoint(path: Path, config: DacConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], DacConfig]:
    """(canonical state dict, config) of a DAC weights file; `config` overrides the file's
    (a .pth file's metadata, or the config.json beside a safetensors file)."""
    meta: Mapping = {}
    if path.suffix == ".safetensors":
        sd = read_safetensors(path)
    else:
        obj = read_torch_object(path)
        sd = obj.get("state_dict", obj)
        meta = obj.get("metadata") or {}
        sd = {k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}
    layout = layout_of(sd)
    if layout is None:
        raise CheckpointError(f"{path}: not a DAC checkpoint (neither the dac package's nor "
                              "transformers' tensor names)")
    if config is None:
        config = _config(path, meta)
    sd = fold_weight_norm(sd)
    if layout == "hf":
        sd = _from_hf(sd, len(config.encoder_rates), len(config.decoder_rates))
    return sd, config


def _config(path: Path, meta: Mapping) -> DacConfig:
    if isinstance(meta.get("kwargs"), Mapping):
        return DacConfig.from_dict(dict(meta["kwargs"]))
    d = read_json(path.with_name("config.json")) or {}
    if d.get("codec") == "dac":
        return DacConfig.from_dict(d)
    if d.get("model_type") == "dac":
        return DacConfig.from_hf(d)
    raise CheckpointError(f"{path}: a DAC checkpoint needs its model arguments: the .pth "
                          "file's metadata, or a config.json beside it (transformers' or "
                          "audiotok's)")


_UNIT = r"res_unit([123])\.(snake1|conv1|snake2|conv2)\."
_UNIT_PART = {"snake1": 0, "conv1": 1, "snake2": 2, "conv2": 3}


def _from_hf(sd: dict[str, torch.Tensor], n_enc: int, n_dec: int) -> dict[str, torch.Tensor]:
    """transformers' names -> the package's (its converter's mapping, inverted)."""
    ends = {"encoder.conv1.": "encoder.block.0.",
            "encoder.snake1.": f"encoder.block.{n_enc + 1}.",
            "encoder.conv2.": f"encoder.block.{n_enc + 2}.",
            "decoder.conv1.": "decoder.model.0.",
            "decoder.snake1.": f"decoder.model.{n_dec + 1}.",
            "decoder.conv2.": f"decoder.model.{n_dec + 2}."}
    rules = [
        (re.compile(r"^encoder\.block\.(\d+)\." + _UNIT),
         lambda m: f"encoder.block.{int(m[1]) + 1}.block.{int(m[2]) - 1}.block."
                   f"{_UNIT_PART[m[3]]}."),
        (re.compile(r"^encoder\.block\.(\d+)\.(snake1|conv1)\."),
         lambda m: f"encoder.block.{int(m[1]) + 1}.block.{3 if m[2] == 'snake1' else 4}."),
        (re.compile(r"^decoder\.block\.(\d+)\." + _UNIT),
         lambda m: f"decoder.model.{int(m[1]) + 1}.block.{int(m[2]) + 1}.block."
                   f"{_UNIT_PART[m[3]]}."),
        (re.compile(r"^decoder\.block\.(\d+)\.(snake1|conv_t1)\."),
         lambda m: f"decoder.model.{int(m[1]) + 1}.block.{0 if m[2] == 'snake1' else 1}."),
    ]
    out = {}
    for key, value in sd.items():
        new = key
        for old, rename in ends.items():
            if key.startswith(old):
                new = rename + key[len(old):]
        for pattern, rename in rules:
            m = pattern.match(key)
            if m:
                new = rename(m) + key[m.end():]
        out[new] = value
    return out
