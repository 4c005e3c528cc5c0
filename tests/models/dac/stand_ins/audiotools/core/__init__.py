"""Stand-in."""

from . import util  # noqa: F401
