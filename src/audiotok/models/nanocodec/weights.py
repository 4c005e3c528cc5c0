"""NanoCodec checkpoints -> (canonical state dict, config).

NeMo's `.nemo` file: a tar (or gzipped tar) holding `model_config.yaml` (read by
config.NanoCodecConfig.from_nemo) and `model_weights.ckpt` (the model's state dict, weight norm
as parametrizations), read without NeMo. Only `audio_encoder.*` and `audio_decoder.*` are kept
(weight norm folded); the FSQ's buffers must agree with the config's levels; the discriminators
and loss modules are dropped. Also audiotok's own save (model.safetensors + config.json).
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import torch

from ...checkpoint import fold_weight_norm, read_json, read_safetensors, weights_file
from ...errors import CheckpointError, ConfigError
from .config import NanoCodecConfig

KEPT = ("audio_encoder.", "audio_decoder.")


def checkpoint_file(path: Path) -> Path:
    return weights_file(path, ("model.safetensors", "*.nemo"), "NanoCodec weights",
                        "a .nemo file, or model.safetensors beside a config.json")


def load_checkpoint(path: Path, config: NanoCodecConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], NanoCodecConfig]:
    if path.suffix == ".safetensors":
        d = read_json(path.with_name("config.json"))
        if config is None and (d is None or d.get("codec") != "nanocodec"):
            raise CheckpointError(f"{path}: NanoCodec weights need their config.json")
        return read_safetensors(path), config or NanoCodecConfig.from_dict(d)
    yaml_text, weights = read_nemo(path)
    import yaml

    try:
        d = yaml.safe_load(yaml_text)
        config = config or NanoCodecConfig.from_nemo(d if isinstance(d, dict) else {})
    except (yaml.YAMLError, ConfigError) as e:
        raise CheckpointError(f"{path}: {e}") from None
    try:
        raw = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - unpickling errors of every kind
        raise CheckpointError(f"{path}: model_weights.ckpt is truncated, corrupt or not a "
                              f"state dict ({type(e).__name__})") from None
    raw = raw.get("state_dict", raw) if isinstance(raw, dict) else {}
    check_levels(raw, config, path)
    sd = {k: v for k, v in raw.items() if k.startswith(KEPT) and isinstance(v, torch.Tensor)}
    if not sd:
        raise CheckpointError(f"{path}: model_weights.ckpt holds no audio_encoder.* / "
                              "audio_decoder.* tensors")
    return fold_weight_norm(sd), config


def read_nemo(path: Path) -> tuple[str, bytes]:
    """(model_config.yaml's text, model_weights.ckpt's bytes) of a .nemo tar (plain or gzip)."""
    try:
        with tarfile.open(path, "r:*") as tar:
            members = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
            files = {}
            for name in ("model_config.yaml", "model_weights.ckpt"):
                if name not in members:
                    raise CheckpointError(f"{path}: a .nemo file holds {name}; this one has "
                                          f"{sorted(members)[:5]}")
                files[name] = tar.extractfile(members[name]).read()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise CheckpointError(f"{path}: truncated, corrupt or not a .nemo file ({e})") from None
    try:
        return files["model_config.yaml"].decode("utf-8"), files["model_weights.ckpt"]
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: model_config.yaml is not text") from None


def check_levels(raw: dict, config: NanoCodecConfig, path: Path) -> None:
    """The FSQ's stored levels (vector_quantizer.fsqs.G.num_levels) are the config's."""
    for g in range(config.num_groups):
        stored = raw.get(f"vector_quantizer.fsqs.{g}.num_levels")
        if stored is not None and tuple(stored.flatten().tolist()) != config.levels:
            raise CheckpointError(f"{path}: FSQ group {g} has levels "
                                  f"{stored.flatten().tolist()}, the config "
                                  f"{list(config.levels)}")
