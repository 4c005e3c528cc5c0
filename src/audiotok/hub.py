"""Model names and paths -> local files. A path is always used as is; a known name is fetched
from the Hugging Face Hub (or its local cache; HF_HUB_OFFLINE=1 uses the cache only)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelNotFoundError


@dataclass(frozen=True)
class Preset:
    name: str
    codec: str
    repo_id: str
    files: tuple[str, ...]  # the first one is what gets loaded; the others must sit beside it


PRESETS = {
    "s2-pro": Preset("s2-pro", "s2", "fishaudio/s2-pro", ("codec.pth",)),
    "xcodec2": Preset("xcodec2", "xcodec2", "HKUSTAudio/xcodec2", ("model.safetensors",)),
    "xcodec2-hf": Preset("xcodec2-hf", "xcodec2", "HKUSTAudio/xcodec2-hf",
                         ("model.safetensors", "config.json")),
}


def resolve(name_or_path: str | os.PathLike) -> tuple[Path, Preset | None]:
    """(local path, preset or None). Raises ModelNotFoundError with what to do next."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path, None
    preset = PRESETS.get(str(name_or_path))
    if preset is None:
        raise ModelNotFoundError(
            f"model {str(name_or_path)!r} is neither an existing file or directory nor a known "
            f"name ({', '.join(sorted(PRESETS))})")
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
