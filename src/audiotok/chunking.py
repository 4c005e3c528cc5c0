"""Window plans over frames, shared by the torch codecs and the ONNX runtime (no torch here)."""

from __future__ import annotations

from collections.abc import Iterator


def context_windows(frames: int, window: int, context: int) -> Iterator[tuple[int, int, slice]]:
    """(start, stop, keep) for each window of `window` frames of a `frames`-long input, widened
    by up to `context` frames on both sides: run the model on frames start..stop and keep the
    slice `keep` of its output (that window's own frames)."""
    for s in range(0, frames, window):
        a, b = max(0, s - context), min(frames, s + window + context)
        yield a, b, slice(s - a, s - a + min(window, frames - s))
