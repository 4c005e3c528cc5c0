"""Model names and paths -> local files. A path is always used as is; a known name is fetched
from the Hugging Face Hub (or its local cache; HF_HUB_OFFLINE=1 uses the cache only)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ModelNotFoundError
from .models.family import Preset
from .models.registry import PRESETS, unknown_name


def resolve(name_or_path: str | os.PathLike) -> tuple[Path, Preset | None]:
    """(local path, preset or None). Raises ModelNotFoundError with what to do next."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path, None
    preset = PRESETS.get(str(name_or_path))
    if preset is None:
        raise unknown_name(str(name_or_path))
    return fetch(preset), preset


def fetch(preset: Preset) -> Path:
    from huggingface_hub import hf_hub_download

    local = []
    for filename in preset.files:
        try:
            local.append(Path(hf_hub_download(preset.repo_id, filename)))
        except Exception as e:  # offline, gated, missing, network: all end the same way
            raise ModelNotFoundError(
                f"cannot get {filename} of {preset.repo_id} from the Hugging Face Hub "
                f"({type(e).__name__}: {_first_line(e)}). If the repository is gated, accept its "
                "licence on huggingface.co and log in (`hf auth login`); offline, pass a local "
                "path with the weights instead (--model PATH)") from None
    return local[0]


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


_GENERIC_STEMS = {"codec", "model", "pytorch_model", "weights"}
_GENERIC_DIRS = {"hf", "original", "transformers"}


def model_label(spec: str) -> str:
    """A short name for a model name or path: a name as it is; a path by its file, or by its
    folder when the file or folder name says nothing (.../s2_tiny/codec.pth -> s2_tiny,
    .../some_codec/hf -> some_codec)."""
    path = Path(spec)
    if not path.exists():
        return spec
    path = path.resolve()
    if path.is_dir():
        return path.parent.name if path.name in _GENERIC_DIRS else path.name
    return path.parent.name if path.stem in _GENERIC_STEMS else path.stem
