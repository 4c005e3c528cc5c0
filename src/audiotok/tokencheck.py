"""Checks of token batches, shared by the torch codecs and the ONNX runtime (no torch here)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import CodesError

BATCH_PLACE = "item {0}, codebook {1}, frame {2}"  # a token's place in a [B, K, T] batch
CLAMP_HINT = "pass clamp=True to clamp"


def rank_error(shape: tuple) -> CodesError:
    return CodesError(f"tokens must be [B, K, T] or [K, T], got shape {tuple(shape)}")


def check_batch(shape: tuple, lengths: list[int], codec: str,
                num_codebooks: int | range) -> None:
    """A [B, K, T] batch with `lengths` valid frames per item, for a codec of num_codebooks
    (or one that decodes any count in a range)."""
    b, k, t = shape
    allowed = num_codebooks if isinstance(num_codebooks, range) else \
        range(num_codebooks, num_codebooks + 1)
    if k not in allowed:
        has = f"has {allowed[0]}" if len(allowed) == 1 else \
            f"decodes {allowed[0]}..{allowed[-1]}"
        raise CodesError(f"tokens have {k} codebooks (shape {tuple(shape)}); the {codec} codec "
                         f"{has}")
    if t == 0 or b == 0 or min(lengths) == 0:
        raise CodesError(f"no frames to decode (shape {tuple(shape)}, lengths {list(lengths)})")


def within_codebooks(tokens: np.ndarray, sizes: Sequence[int], clamp: bool, where: str,
                     hint: str) -> np.ndarray:
    """tokens [..., K, T] (integers) with every token in 0..size - 1 of its codebook: as given,
    clamped into range when `clamp`, else a CodesError naming the first token out of range,
    where it is (`where` formats its index: "codebook {0}, frame {1}"), the range and `hint`."""
    high = np.asarray(sizes, dtype=np.int64)[:, None] - 1
    bad = (tokens < 0) | (tokens > high)
    if not bad.any():
        return tokens
    if clamp:
        return np.minimum(np.maximum(tokens, 0), high)
    index = tuple(int(v) for v in np.argwhere(bad)[0])
    raise CodesError(f"token {int(tokens[index])} at {where.format(*index)} is outside "
                     f"0..{sizes[index[-2]] - 1} ({hint})")


def check_utterance(utterance, batch: int, count: int, size: int, title: str,
                    clamp: bool = False) -> np.ndarray | None:
    """Utterance tokens (Codes.globals) int64 [batch, count] in 0..size - 1, for a codec whose
    codes carry `count` of them (0: none, and None back); [count] or [1, count] stand for every
    item. CodesError when they are missing, misshapen or out of range (clamp=True: clamped)."""
    if not count:
        if utterance is not None:
            raise CodesError(f"{title} has no utterance tokens; these codes carry globals")
        return None
    if utterance is None:
        raise CodesError(f"{title} decodes each item with its {count} global tokens (the "
                         "utterance's, from encode): pass Codes that carry them "
                         f"(Codes.globals) or globals=[B, {count}]")
    if type(utterance).__module__.split(".", 1)[0] == "torch":
        utterance = utterance.detach().cpu().numpy()
    try:
        g = np.asarray(utterance)
    except (TypeError, ValueError):
        g = np.asarray(None)
    if g.dtype.kind not in "iu":
        raise CodesError(f"globals must be integers, got {g.dtype} values")
    g = g.reshape(1, -1) if g.ndim == 1 else g
    if g.ndim != 2 or g.shape[1] != count or g.shape[0] not in (1, batch):
        raise CodesError(f"{title} takes {count} global tokens an item: globals must be "
                         f"[{batch}, {count}] (or [{count}] for all), got {tuple(g.shape)}")
    g = np.broadcast_to(g.astype(np.int64), (batch, count))
    return within_codebooks(g[:, None, :], (size,), clamp, "item {0}, global token {2}",
                            CLAMP_HINT)[:, 0].copy()
