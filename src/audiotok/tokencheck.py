"""Checks of token batches, shared by the torch codecs and the ONNX runtime (no torch here)."""

from __future__ import annotations

from .errors import CodesError


def rank_error(shape: tuple) -> CodesError:
    return CodesError(f"tokens must be [B, K, T] or [K, T], got shape {tuple(shape)}")


def check_batch(shape: tuple, lengths: list[int], codec: str, num_codebooks: int) -> None:
    """A [B, K, T] batch with `lengths` valid frames per item, for a codec of num_codebooks."""
    b, k, t = shape
    if k != num_codebooks:
        raise CodesError(f"tokens have {k} codebooks (shape {tuple(shape)}); the {codec} codec "
                         f"has {num_codebooks}")
    if t == 0 or b == 0 or min(lengths) == 0:
        raise CodesError(f"no frames to decode (shape {tuple(shape)}, lengths {list(lengths)})")


def out_of_range(value: int, item: int, codebook: int, frame: int, size: int) -> CodesError:
    return CodesError(f"token {value} at item {item}, codebook {codebook}, frame {frame} is "
                      f"outside 0..{size - 1} (pass clamp=True to clamp)")
