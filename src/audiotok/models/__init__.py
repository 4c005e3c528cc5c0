"""Loading a codec: a name (models.registry's presets) or a local checkpoint, matched to its
family (models/<family>/__init__.py declares each; models/family.py says what a family is)."""

from __future__ import annotations

import os

from ..errors import AudiotokError, CheckpointError
from .registry import DEFAULT_MODEL, FAMILIES, detect_family, family

__all__ = ["DEFAULT_MODEL", "FAMILIES", "detect_family", "family", "load", "split_spec",
           "with_options"]


def split_spec(spec: str | os.PathLike) -> tuple[str | os.PathLike, dict]:
    """(name or path, load options) of a model spec: a name or path, optionally followed by
    `?option=value&...` ("mimi?codebooks=8&padding=layer"). An existing path is never split.
    Integer values become ints."""
    text = str(spec)
    if "?" not in text or os.path.exists(text):
        return spec, {}
    name, _, query = text.partition("?")
    options = {}
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not key or not eq:
            raise AudiotokError(f"model spec {text!r}: expected option=value after '?', got "
                                f"{part!r}")
        options[key] = int(value) if value.lstrip("-").isdigit() else value
    return name, options


def with_options(spec: str, **options) -> str:
    """spec with `?option=value` appended for every option that is not None."""
    given = [f"{k}={v}" for k, v in options.items() if v is not None]
    if not given:
        return spec
    return spec + ("&" if "?" in spec and not os.path.exists(spec) else "?") + "&".join(given)


def load(name_or_path: str | os.PathLike, *, device=None, dtype="float32", config=None,
         codec: str | None = None, cuda_graphs: bool = False, **options):
    """Load a codec by name (e.g. "s2-pro", "xcodec2", "xcodec2-hf": fetched from the Hugging
    Face Hub) or from a local checkpoint file or directory; either may end in
    `?option=value&...` (split_spec), the form the command line and servers pass options in.

    config: overrides the configuration found in the files. codec: a family name ("s2",
    "xcodec2", ...) to skip detection (a checkpoint of another codec is then an error).
    cuda_graphs: on a CUDA device, replay encode/decode calls as CUDA graphs cached per input
    shape (no effect elsewhere; see nn/cuda_graphs.py). dtype: a torch dtype or its name
    ("bfloat16"). options: the family's own load options (e.g. Mimi's codebooks=8,
    padding="layer"); `audiotok info --codecs` lists them.
    """
    from ..hub import resolve
    from ..nn.precision import parse_dtype

    if isinstance(dtype, str):
        dtype = parse_dtype(dtype)
    name_or_path, spec_options = split_spec(name_or_path)
    options = {**spec_options, **options}
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
    options = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(options) - set(found.options))
    if unknown:
        takes = ", ".join(found.options) or "none"
        raise AudiotokError(f"{found.title} takes no load option {', '.join(unknown)} "
                            f"(its options: {takes})")
    result = found.codec_class().from_checkpoint(path, config, device=device, dtype=dtype,
                                                 cuda_graphs=cuda_graphs, **options)
    result.announce_licence()
    return result


def _detect_or_none(path):
    try:
        return detect_family(path)
    except CheckpointError:
        return None
