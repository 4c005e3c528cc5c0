"""audiotok: neural audio codec tokenizers for speech LLMs.

    codec = audiotok.load("s2-pro")
    codes = codec.encode("speech.wav")
    audio = codec.decode(codes)
"""

from ._version import __version__
from .codec import Codec
from .codes import Codes
from .models import load

__all__ = ["Codec", "Codes", "load", "__version__"]
