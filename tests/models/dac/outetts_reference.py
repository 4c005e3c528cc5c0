"""OuteTTS 1.0's DAC.speech pipeline (outetts 0.4.4, `outetts/dac/interface.py`) from
.refs/outetts (tests/install_references.sh), loaded by file path: `import outetts` needs
llama-cpp-python, polars, whisper and more, none of which its DAC interface uses; the package
and its `utils.helpers` (the hub download's cache folder) are stubbed. Its `dac` is the DAC
oracle's (the stand-ins of reference.import_dac)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

from tests.models.dac import reference

ROOT = Path(__file__).resolve().parents[3]
REFS = Path(os.environ.get("AUDIOTOK_OUTETTS_REF", ROOT / ".refs" / "outetts"))
NAME = "outetts.dac.interface"


def _package(name: str, path: Path | None) -> None:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = [str(path)] if path else []
    sys.modules[name] = module


def interface_module():
    """outetts.dac.interface (imported once); skip when outetts is not installed."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    source = REFS / "outetts" / "dac" / "interface.py"
    if not source.is_file():
        pytest.skip(f"OuteTTS's DAC pipeline is not installed in {REFS} "
                    "(tests/install_references.sh)")
    reference.import_dac()
    _package("outetts", REFS / "outetts")
    _package("outetts.dac", REFS / "outetts" / "dac")
    _package("outetts.utils", None)
    helpers = types.ModuleType("outetts.utils.helpers")
    helpers.__spec__ = importlib.machinery.ModuleSpec("outetts.utils.helpers", None)
    sys.modules["outetts.utils.helpers"] = helpers
    spec = importlib.util.spec_from_file_location(NAME, source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module


def dac_interface(pth: Path):
    """OuteTTS's DacInterface over the weights file `pth` (on the CPU)."""
    return interface_module().DacInterface(device="cpu", model_path=str(pth))


def prompt_processor(tokenizer_folder: Path):
    """OuteTTS 1.0's PromptProcessor (outetts/version/v3/prompt_processor.py) over a tokenizer
    folder (transformers' AutoTokenizer reads it); `ftfy`, which only its text normalisation
    uses, stubbed."""
    name = "outetts.version.v3.prompt_processor"
    if name not in sys.modules:
        interface_module()  # (the package stubs)
        source = REFS / "outetts" / "version" / "v3"
        _package("outetts.version", source.parent)
        _package("outetts.version.v3", source)
        real = sys.modules.get("ftfy")
        sys.modules["ftfy"] = types.ModuleType("ftfy")
        try:
            spec = importlib.util.spec_from_file_location(name, source / "prompt_processor.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        finally:  # (the stand-in stays the module's own: others that look for ftfy find
            del sys.modules["ftfy"]  # what is installed)
            if real is not None:
                sys.modules["ftfy"] = real
    return sys.modules[name].PromptProcessor(str(tokenizer_folder))
