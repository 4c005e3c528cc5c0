"""Export to other runtimes: codec GGUF for s2.cpp (`export_gguf`)."""

from .gguf import export_gguf

__all__ = ["export_gguf"]
