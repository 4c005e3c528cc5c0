"""Checkpoint helpers shared by the codecs' loaders: reading files, folding weight norm, and
checking a state dict against what a model expects."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file

from .errors import CheckpointError
from .fileio import read_json  # noqa: F401 - the loaders read configs through here

_WN_SPELLINGS = (
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),
    (".weight_g", ".weight_v"),
)


def weights_file(path, patterns: Iterable[str], what: str, expected: str) -> Path:
    """The weights file a checkpoint path stands for: the path itself if it is a file, else the
    first file in the folder that matches `patterns` in order (names or globs; a glob's matches
    sorted); CheckpointError "no `what` here (expected `expected`)" otherwise."""
    path = Path(path)
    if path.is_file():
        return path
    for pattern in patterns:
        found = sorted(f for f in path.glob(pattern) if f.is_file())
        if found:
            return found[0]
    raise CheckpointError(f"{path}: no {what} here (expected {expected})")


def read_torch(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a torch checkpoint (`torch.load(weights_only=True)`), unwrapping `state_dict`."""
    obj = read_torch_object(path)
    if isinstance(obj.get("state_dict"), Mapping):
        obj = obj["state_dict"]
    return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def read_torch_object(path: Path) -> Mapping:
    """The dict a torch checkpoint holds (`torch.load(weights_only=True)`: tensors and plain
    values, e.g. a state_dict beside metadata)."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=_is_zip(path))
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as e:
        raise CheckpointError(f"{path}: cannot read torch checkpoint ({_first_line(e)}); "
                              "the file is truncated, corrupt or not a checkpoint") from None
    except Exception as e:  # pickle errors of every kind, rejected unsafe globals
        raise CheckpointError(f"{path}: not a plain tensor checkpoint ({_first_line(e)})") from None
    if not isinstance(obj, Mapping):
        raise CheckpointError(f"{path}: expected a dict of tensors, got {type(obj).__name__}")
    return obj


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(path)
    except Exception as e:  # SafetensorError (not exported everywhere), OSError...
        raise CheckpointError(f"{path}: cannot read safetensors file ({_first_line(e)})") from None


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a `.safetensors` file, or of a torch-saved state dict (any other)."""
    return read_safetensors(path) if path.suffix == ".safetensors" else read_torch(path)


def fold_weight_norm(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace every weight-norm pair (g, v), in either spelling, by `weight` = g * v / ||v||,
    the norm taken over all axes but 0 (as torch computes it, no epsilon). A stale plain
    `weight` next to a pair is dropped."""
    pairs: dict[str, tuple[str, str]] = {}
    for key in sd:
        for g_suffix, v_suffix in _WN_SPELLINGS:
            if key.endswith(g_suffix):
                base = key[: -len(g_suffix)]
                if base + v_suffix not in sd:
                    raise CheckpointError(f"weight norm of {base}: {key} has no matching "
                                          f"{base + v_suffix}")
                pairs[base] = (key, base + v_suffix)
            elif key.endswith(v_suffix) and key[: -len(v_suffix)] + g_suffix not in sd:
                raise CheckpointError(f"weight norm: {key} has no matching g tensor")
    folded = set()
    for base, (g_key, v_key) in pairs.items():
        folded.update((g_key, v_key, base + ".weight"))
    out = {k: v for k, v in sd.items() if k not in folded}
    for base, (g_key, v_key) in pairs.items():
        g, v = sd[g_key], sd[v_key]
        if g.dim() != v.dim() or g.shape[0] != v.shape[0]:
            raise CheckpointError(f"weight norm of {base}: g {list(g.shape)} does not fit "
                                  f"v {list(v.shape)}")
        out[base + ".weight"] = torch._weight_norm(v.float(), g.float(), 0)
    return out


def check_state_dict(
    got: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor], source: str,
    allowed_dtypes: Iterable[torch.dtype] = (torch.float32, torch.float16, torch.bfloat16),
) -> None:
    """Raise CheckpointError listing missing, unexpected, misshapen or wrongly typed tensors."""
    allowed = set(allowed_dtypes)
    problems = []
    missing = [k for k in expected if k not in got]
    unexpected = [k for k in got if k not in expected]
    for k in missing[:5]:
        problems.append(f"missing tensor {k} (expected shape {_shape(expected[k])})")
    for k in unexpected[:5]:
        problems.append(f"unexpected tensor {k} (shape {_shape(got[k])})")
    for k in expected:
        if k in got:
            if got[k].shape != expected[k].shape:
                problems.append(f"tensor {k} has shape {_shape(got[k])}, expected "
                                f"{_shape(expected[k])}")
            elif got[k].dtype not in allowed:
                problems.append(f"tensor {k} has dtype {got[k].dtype}, expected a float type")
    if problems:
        more = len(missing) + len(unexpected) - min(len(missing), 5) - min(len(unexpected), 5)
        tail = f" (and {more} more missing/unexpected)" if more > 0 else ""
        raise CheckpointError(f"{source} does not fit the model: " + "; ".join(problems) + tail)


def load_into(model: torch.nn.Module, sd: Mapping[str, torch.Tensor], source: str) -> None:
    """Check `sd` against the model's own state dict, then make its tensors (as float32) the
    model's parameters. The model may live on the meta device: nothing is allocated twice."""
    check_state_dict(sd, model.state_dict(), source)
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True, assign=True)


def build_model(model_class, config, sd: Mapping[str, torch.Tensor], source: str
                ) -> torch.nn.Module:
    """model_class(config) with the weights of `sd` (checked by load_into), built on the meta
    device so that no memory goes to weights about to be replaced."""
    with torch.device("meta"):
        model = model_class(config)
    load_into(model, sd, source)
    return model


def _shape(t: torch.Tensor) -> list[int]:
    return list(t.shape)


def _is_zip(path: Path) -> bool:
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
