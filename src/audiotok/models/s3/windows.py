"""Inputs over 30 s: the encoder sees at most 3000 mel frames, so longer inputs run in windows
of 30 s every 26 s, and the windows' tokens merge into one sequence (chunking.FeatureWindows:
2 s cut at each side of a joint)."""

from __future__ import annotations

import torch

from ...chunking import FeatureWindows
from .config import WINDOW_FRAMES, WINDOW_STRIDE, S3Config

# merge option -> FeatureWindows merge: "s3tokenizer" as its merge_tokenized_segments (a last
# window of 2 s or less gives nothing: the input loses up to 2 s of tokens); "lossless"
MERGES = {"s3tokenizer": "trim", "lossless": "lossless"}


def feature_windows(cfg: S3Config, merge: str) -> FeatureWindows:
    return FeatureWindows(WINDOW_FRAMES, WINDOW_STRIDE, cfg.frames_per_token,
                          2 * cfg.token_rate, MERGES[merge])


def merged(codes: list[torch.Tensor], frames: int, plan: FeatureWindows) -> torch.Tensor:
    """One item's tokens from its windows' codes [T_w] (in plan.spans order)."""
    return torch.cat([c[a:b] for c, (a, b) in zip(codes, plan.pieces(frames), strict=True)])
