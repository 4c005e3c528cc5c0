"""The codec families audiotok knows: one line per folder under models/. Nothing here imports
torch; a family's model code is imported when one of its checkpoints is loaded."""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import CheckpointError, ModelNotFoundError
from .family import Checkpoint, Family, Preset

FOLDERS = (
    "s2",
    "xcodec2",
    "mimi",
    "snac",
    "dac",
    "encodec",
    "qwen3_tts",
    "neucodec",
    "distill_neucodec",
    "s3",
    "wavtokenizer",
    "xcodec",
    "nanocodec",
    "bicodec",
)
DEFAULT_MODEL = "s2-pro"  # what the command line loads without --model

FAMILIES: dict[str, Family] = {}
for _folder in FOLDERS:
    _family = importlib.import_module(f".{_folder}", __package__).FAMILY
    FAMILIES[_family.name] = _family

PRESETS: dict[str, Preset] = {p.name: Preset(p.name, p.repo_id, p.files, f.name)
                              for f in FAMILIES.values() for p in f.presets}


def family(name: str) -> Family:
    """A family by codec name ("s2"); ValueError naming the known ones."""
    if name not in FAMILIES:
        raise ValueError(f"unknown codec {name!r}; expected one of {sorted(FAMILIES)}")
    return FAMILIES[name]


def detect_family(path: Path) -> Family:
    """Which family a local checkpoint file or folder holds: the codec its config.json names
    (audiotok's own `"codec"` key, as save_pretrained writes it), else the first family whose
    detect() claims it (those that claim broadly, detect_last, after the others)."""
    checkpoint = Checkpoint(path)
    named = checkpoint.config.get("codec")
    if isinstance(named, str) and named in FAMILIES:
        return FAMILIES[named]
    for f in sorted(FAMILIES.values(), key=lambda f: f.detect_last):
        if f.detect(checkpoint):
            return f
    raise CheckpointError(
        f"{path}: cannot tell which codec this checkpoint holds (no config.json naming one, and "
        f"no known file or tensor layout); pass codec= (one of {', '.join(sorted(FAMILIES))})")


def llm_schemes() -> dict[str, tuple[Family, str]]:
    """Token-id scheme name -> (its family, "module:Class"), over every family."""
    return {scheme: (f, ref) for f in FAMILIES.values() for scheme, ref in f.llm_schemes.items()}


def export_formats() -> dict[str, list[Family]]:
    """Format name -> the families that export it ("onnx" included)."""
    formats: dict[str, list[Family]] = {"onnx": [f for f in FAMILIES.values() if f.onnx]}
    for f in FAMILIES.values():
        for name in f.exporters:
            formats.setdefault(name, []).append(f)
    return formats


def unknown_name(name: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"model {name!r} is neither an existing file or directory nor a known name "
        f"({', '.join(sorted(PRESETS))})")
