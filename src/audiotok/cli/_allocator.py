"""Set before PyTorch is imported by the command (it reads these once, at its first
allocation): its CPU allocator backs tensors of 2 MB or more with transparent huge pages
(madvise), so a long input's large activations fault in far fewer pages
(`python benchmarks/system/huge_pages.py`; docs/performance.md). An explicit THP_MEM_ALLOC_ENABLE in
the environment (0 turns it off) is kept. The library itself sets nothing: a program that
imports audiotok sets it itself."""

from __future__ import annotations

import os

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
