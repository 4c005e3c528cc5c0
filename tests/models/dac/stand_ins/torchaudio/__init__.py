"""Stand-in: the reference packages import torchaudio; encode/decode never call it."""

__version__ = "0.0.0+stand-in"

from . import functional, transforms  # noqa: E402,F401
