"""The codec contract: what a codec family declares so that everything else works from it.

A family is one folder, `models/<family>/`, whose `__init__.py` defines `FAMILY = Family(...)`
and imports nothing heavy (this module and the registry import no torch). The folder holds the
rest: `config.py`, `model.py`, `weights.py` (any checkpoint layout -> the canonical state dict),
`codec.py` (a `Codec` subclass: facts, frame rule, encode/decode, capabilities) and, where the
family has them, `onnx.py` (its graphs), `llm.py` (its language models' token ids) and exporters
of other formats. `models/registry.py` lists the folders. The docs' "Adding a codec" page walks
through it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path


@dataclass(frozen=True)
class Preset:
    """A model name users type (`audiotok.load("s2-pro")`), fetched from the Hugging Face Hub."""

    name: str
    repo_id: str
    files: tuple[str, ...]  # the first one is what gets loaded; the others must sit beside it
    family: str = ""  # filled in by the registry


@dataclass(frozen=True)
class Exporter:
    """A file format a family writes beyond ONNX (`audiotok export --format NAME`)."""

    function: str  # "module:function" in the family's package: fn(codec, out, dtype) -> Path
    help: str  # one line for the command line
    dtypes: tuple[str, ...] = ("f32",)  # accepted --dtype values; the first is the default
    describe: str = ""  # what the command line prints after the path, e.g. "GGUF {dtype}"


@dataclass(frozen=True)
class LoadOption:
    """An option a family's codec takes at load (`audiotok.load(name, codebooks=8)`; on the
    command line --codebooks 8)."""

    help: str  # one line, for the command line
    type: type = str  # int or str


@dataclass(frozen=True)
class Family:
    """What a codec family declares (see the module docstring).

    name: the codec id that Codes files, exports, token files and servers record; never
    changes. title, licence: shown on load (the weights' licence, never ours). codec:
    "module:Class" of its Codec subclass in the family's package, imported on first load.
    presets: names fetched from the hub. detect(checkpoint): whether a local file or folder
    holds this family's weights (called only when no config.json names the codec). onnx:
    "module:function" that writes its ONNX graphs (see export/onnx.py), None: no ONNX export.
    exporters: further formats. llm_schemes: scheme name -> "module:Class" of a token-id scheme
    (see export/llm.py) for the language models that use this codec. options: the keyword
    options its codec takes at load (`audiotok.load(name, codebooks=8)`); the command line
    offers every family's as --<option>. detect_last: its detect() claims broadly (any file of
    a suffix), so every other family is asked first."""

    name: str
    title: str
    licence: str
    codec: str
    package: str  # the family's package (its __name__)
    presets: tuple[Preset, ...] = ()
    detect: Callable[[Checkpoint], bool] = field(default=lambda checkpoint: False)
    onnx: str | None = None
    exporters: Mapping[str, Exporter] = field(default_factory=dict)
    llm_schemes: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, LoadOption] = field(default_factory=dict)
    # detect claims files broadly (e.g. any .pth): asked only once no other family claims one
    detect_last: bool = False

    def resolve(self, ref: str):
        """The object a "module:attr" reference (relative to the family's package) names."""
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module, self.package), attr)

    def codec_class(self):
        return self.resolve(self.codec)

    def export_formats(self) -> list[str]:
        return [*(["onnx"] if self.onnx else []), *self.exporters]


class Checkpoint:
    """What detection looks at: a local file or folder, the config.json beside it (or in it),
    and, read on demand, the tensor names of its weights (a safetensors file, or a torch
    state dict saved as `.bin`)."""

    def __init__(self, path: Path):
        from ..fileio import read_json

        self.path = Path(path)
        self.weights = self.path
        if self.path.is_dir():  # a folder's weights: model.safetensors, else pytorch_model.bin
            self.weights = self.path / "model.safetensors"
            if not self.weights.is_file() and (self.path / "pytorch_model.bin").is_file():
                self.weights = self.path / "pytorch_model.bin"
        self.config: dict = read_json(self.weights.with_name("config.json")) or {}

    @property
    def suffix(self) -> str:
        return self.weights.suffix.lower()

    def has(self, *names: str) -> bool:
        """Whether the folder (or the file's folder) holds one of `names` (globs allowed)."""
        folder = self.path if self.path.is_dir() else self.path.parent
        return any(any(folder.glob(n)) for n in names)

    @cached_property
    def tensor_names(self) -> list[str]:
        """Tensor names of a safetensors weights file (its header only) or of a folder's
        `pytorch_model.bin` / a `.bin`, `.pt` or `.ckpt` file (a torch state dict, or the
        `state_dict` in one, memory-mapped); [] for other files."""
        if self.suffix in (".bin", ".pt", ".ckpt") and self.weights.is_file():
            from ..checkpoint import read_torch
            from ..errors import CheckpointError

            try:
                return list(read_torch(self.weights))
            except CheckpointError:  # not a state dict: no family claims it by its names
                return []
        if self.suffix != ".safetensors" or not self.weights.is_file():
            return []
        from safetensors import safe_open

        from ..errors import CheckpointError

        try:
            with safe_open(str(self.weights), "np") as f:
                return list(f.keys())
        except Exception as e:  # noqa: BLE001 - SafetensorError is not exported everywhere
            raise CheckpointError(f"{self.weights}: cannot read safetensors file ({e})") from None


def licence_notice(title: str, licence: str) -> str:
    """What loading a model prints about its weights' licence (`licence` as a family declares
    it: a licence's name, or a sentence saying none is stated)."""
    return f"audiotok: {title} weights: {licence}."


def config_from_dict(cls, d: dict, title: str):
    """A family's config dataclass from its `to_dict` form (what config.json holds, besides
    audiotok's own "codec" and "format_version" keys): lists become tuples; an unknown key or a
    bad value is a ConfigError naming the codec."""
    from ..errors import ConfigError

    known = {f.name for f in fields(cls)}
    unknown = sorted(k for k in d if k not in known and k not in ("codec", "format_version"))
    if unknown:
        raise ConfigError(f"unknown {title} config keys {unknown}")
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known}
    try:
        return cls(**kw)
    except TypeError as e:
        raise ConfigError(f"bad {title} config: {e}") from None
