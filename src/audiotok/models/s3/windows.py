"""Inputs over 30 s: the encoder sees at most 3000 mel frames, so longer inputs run in windows
of 30 s every 26 s, and the windows' tokens merge into one sequence."""

from __future__ import annotations

import torch

from .config import WINDOW_FRAMES, WINDOW_STRIDE, S3Config

MERGES = ("s3tokenizer", "lossless")


def windows(frames: int) -> list[tuple[int, int]]:
    """(start, end) mel frames of each window: the whole input up to 3000 frames, else windows
    of 3000 starting every 2600 frames while the start is inside the input."""
    if frames <= WINDOW_FRAMES:
        return [(0, frames)]
    return [(s, min(s + WINDOW_FRAMES, frames)) for s in range(0, frames, WINDOW_STRIDE)]


def pieces(frames: int, cfg: S3Config, merge: str) -> list[tuple[int, int]]:
    """(first, end) token of each window kept in the merged sequence, in the window's own
    token numbering. "s3tokenizer": the first window drops its last 2 s, the middle ones 2 s at
    each end, the last its first 2 s (a last window shorter than 2 s gives nothing: the input
    loses up to 2 s of tokens, as s3tokenizer's merge_tokenized_segments). "lossless": the same
    cuts, but every token of the input kept once (ceil(frames / frames_per_token) tokens)."""
    spans = windows(frames)
    fpt = cfg.frames_per_token
    sizes = [-(-(e - s) // fpt) for s, e in spans]
    if len(spans) == 1:
        return [(0, sizes[0])]
    h = 2 * cfg.token_rate  # half the 4 s overlap, in tokens
    if merge == "s3tokenizer":
        last = len(spans) - 1
        return [(0 if i == 0 else min(h, n), n if i == last else max(0, n - h))
                for i, n in enumerate(sizes)]
    total = -(-frames // fpt)
    offsets = [s // fpt for s, _ in spans]
    starts = [0] + [o + h for o in offsets[1:]]
    out = []
    for i, o in enumerate(offsets):
        lo, hi = starts[i], (starts[i + 1] if i + 1 < len(spans) else total)
        hi = min(hi, total)
        out.append((lo - o, max(lo, hi) - o))
    return out


def token_count(frames: int, cfg: S3Config, merge: str) -> int:
    return sum(b - a for a, b in pieces(frames, cfg, merge))


def merged(codes: list[torch.Tensor], frames: int, cfg: S3Config, merge: str) -> torch.Tensor:
    """One item's tokens from its windows' codes [T_w] (in windows() order)."""
    return torch.cat([c[a:b] for c, (a, b) in zip(codes, pieces(frames, cfg, merge),
                                                   strict=True)])
