"""audiotok: neural audio codec tokenizers for speech LLMs.

    codec = audiotok.load(name_or_path)  # a model name (audiotok info --codecs) or a checkpoint
    codes = codec.encode("speech.wav")
    audio = codec.decode(codes)

`load` of an ONNX export folder (audiotok export --format onnx) gives the torch-free runtime;
importing audiotok alone imports no torch (Codec, Codes and the models load on first use).
"""

from __future__ import annotations

import os
from pathlib import Path

from ._version import __version__

__all__ = ["Codec", "Codes", "load", "__version__"]


def load(name_or_path: str | os.PathLike, **kwargs):
    """A codec by name or path (see audiotok.models.load); an ONNX export folder gives an
    audiotok.runtime.OnnxCodec, which runs on onnxruntime and numpy without torch."""
    if (Path(name_or_path) / "audiotok_onnx.json").is_file():
        from .runtime import OnnxCodec

        other = sorted(set(kwargs) - {"threads", "providers"})
        if other:
            from .errors import AudiotokError

            raise AudiotokError(
                f"{name_or_path} is an ONNX export, run by onnxruntime from Python: "
                f"audiotok.load(folder) takes threads= and providers=, not {', '.join(other)}; "
                "the command line's model commands take PyTorch checkpoints")
        return OnnxCodec(name_or_path, **kwargs)
    from .models import load as load_model

    return load_model(name_or_path, **kwargs)


def __getattr__(name: str):
    if name == "Codec":
        from .codec import Codec

        return Codec
    if name == "Codes":
        from .codes import Codes

        return Codes
    raise AttributeError(f"module 'audiotok' has no attribute {name!r}")
