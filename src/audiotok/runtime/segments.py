"""Segmented codecs in the ONNX runtime (a manifest whose frame rule is "segments:L:S", e.g.
EnCodec 48 kHz): the input cut into segments of L samples every S, each run through the
encoder graph alone (codes and the segment's scale out); decoding runs each segment's codes
through the decoder graph, multiplies by its scale and overlap-adds the segments with the
triangular weights of the torch codec (numpy here, no torch)."""

from __future__ import annotations

import numpy as np

from ..chunking import frame_segments, segments_span
from ..errors import CodesError


def encode(session, audio: np.ndarray, length: int, stride: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """(codes [B, K, T], scales [B, S]) of audio [B, C, N] (items of one length)."""
    codes, scales = [], []
    for start in range(0, audio.shape[-1], stride):
        c, s = session.run(None, {"audio": audio[..., start : start + length]})
        codes.append(c)
        scales.append(s.reshape(-1))
    return np.concatenate(codes, -1), np.stack(scales, 1)


def decode(session, codes: np.ndarray, scales: np.ndarray | None, length: int, stride: int,
           hop: int) -> np.ndarray:
    """Audio [B, C, span] of codes [B, K, T] (items of one length) and their scales [B, S]
    (None: not scaled)."""
    frames = frame_segments(codes.shape[-1], length, stride, hop)
    if scales is not None and scales.shape[1] < len(frames):
        raise CodesError(f"{codes.shape[-1]} frames are {len(frames)} segments; the codes "
                         f"carry {scales.shape[1]} segment scales")
    out = weights = weight = None
    start = 0
    for s, n in enumerate(frames):
        piece = session.run(None, {"codes": codes[..., start : start + n]})[0]
        if scales is not None:
            piece = piece * scales[:, s, None, None].astype(np.float32)
        if out is None:  # the triangle over the first piece, as the torch codec's OverlapAdd
            t = np.linspace(0, 1, piece.shape[-1] + 2, dtype=np.float32)[1:-1]
            weight = (0.5 - np.abs(t - 0.5)).astype(np.float32)
            span = segments_span(frames, stride, hop)
            out = np.zeros((*piece.shape[:-1], span), np.float32)
            weights = np.zeros(span, np.float32)
        at, size = s * stride, piece.shape[-1]
        out[..., at : at + size] += weight[:size] * piece
        weights[at : at + size] += weight[:size]
        start += n
    return out / weights
