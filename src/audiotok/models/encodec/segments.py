"""EnCodec 48 kHz's segments: the input is cut into 1 s segments (48000 samples) every 47520
samples (1 % overlap), each scaled to unit rms (of its channels' mean) and encoded alone, its
scale kept beside its codes (Codes.scales); decoding decodes each segment, multiplies it by its
scale and overlap-adds the segments with triangular weights (the package's _linear_overlap_add).
The codes of an item are its segments' codes one after another: 150 frames a whole segment, a
shorter one ceil(its samples / 320); the segments of T frames are known from T alone."""

from __future__ import annotations

import math

import torch

from ...errors import CodesError
from .config import EncodecConfig


def layout(cfg: EncodecConfig) -> tuple[int, int, int]:
    """(samples a segment, samples between segment starts, frames a whole segment)."""
    length = int(cfg.segment * cfg.sample_rate)
    stride = max(1, int((1 - cfg.overlap) * length))
    return length, stride, math.ceil(length / cfg.hop_length)


def frames_of(cfg: EncodecConfig, samples: int) -> list[int]:
    """Frames of each segment of an item of `samples` samples."""
    length, stride, _ = layout(cfg)
    return [math.ceil(min(length, samples - start) / cfg.hop_length)
            for start in range(0, samples, stride)]


def segment_frames(cfg: EncodecConfig, frames: int) -> list[int]:
    """Frames of each segment of an item of `frames` frames: the segments of the shortest input
    that gives that many (every input that gives as many frames has the same segments: a
    segment of 48000 samples is 150 whole frames, so a frame count fixes where the last
    segments end; tests/models/encodec/test_48khz.py checks every length up to 3 s)."""
    lo, hi = 1, frames * cfg.hop_length
    while lo < hi:  # the total grows with the samples: the least with at least `frames`
        mid = (lo + hi) // 2
        if sum(frames_of(cfg, mid)) >= frames:
            hi = mid
        else:
            lo = mid + 1
    out = frames_of(cfg, lo)
    if sum(out) != frames:
        raise CodesError(f"no input gives {frames} frames of {cfg.segment:g} s segments")
    return out


def decoded_samples(cfg: EncodecConfig, frames: int) -> int:
    """Samples the overlap-add of an item of `frames` frames gives."""
    stride = layout(cfg)[1]
    return max(i * stride + n * cfg.hop_length
               for i, n in enumerate(segment_frames(cfg, frames)))


def encode(model, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [B, K, T], scales [B, S]) of audio [B, C, N] (items of one length)."""
    cfg = model.config
    length, stride, _ = layout(cfg)
    codes, scales = [], []
    for start in range(0, audio.shape[-1], stride):
        x = audio[..., start : start + length]
        scale = x.mean(1, keepdim=True).pow(2).mean(2, keepdim=True).sqrt() + 1e-8 \
            if cfg.normalize else torch.ones(x.shape[0], 1, 1, device=x.device)
        codes.append(model.encode(x / scale if cfg.normalize else x))
        scales.append(scale.view(-1))
    return torch.cat(codes, -1), torch.stack(scales, 1)


def decode(model, codes: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """Audio [B, C, decoded_samples(T)] of codes [B, k, T] (items of one length) and their
    segments' scales [B, S] (None: not scaled, as the package decodes a segment without one)."""
    cfg = model.config
    pieces, start = [], 0
    for s, frames in enumerate(segment_frames(cfg, codes.shape[-1])):
        out = model.decode(codes[..., start : start + frames])
        if scales is not None:
            out = out * scales[:, s].view(-1, 1, 1).to(out)
        pieces.append(out)
        start += frames
    return overlap_add(pieces, layout(cfg)[1])


def overlap_add(pieces: list[torch.Tensor], stride: int) -> torch.Tensor:
    """The pieces, each starting `stride` after the previous, weighted by a triangle over the
    first piece's length (0.5 - |t - 0.5|, t on (0, 1) without its ends) and divided by the
    sum of the weights, as the package computes it. The package sizes the sum by the last
    piece, which fails when the one before reaches further (its last segment 1 frame, the one
    before 150 frames but shorter than a whole segment: e.g. 47681-47840 samples); here the sum
    spans every piece."""
    first = pieces[0]
    total = max(i * stride + piece.shape[-1] for i, piece in enumerate(pieces))
    t = torch.linspace(0, 1, first.shape[-1] + 2, device=first.device, dtype=first.dtype)[1:-1]
    weight = 0.5 - (t - 0.5).abs()
    weights = torch.zeros(total, device=first.device, dtype=first.dtype)
    out = first.new_zeros(*first.shape[:-1], total)
    for i, piece in enumerate(pieces):
        n, at = piece.shape[-1], i * stride
        out[..., at : at + n] += weight[:n] * piece
        weights[at : at + n] += weight[:n]
    return out / weights
