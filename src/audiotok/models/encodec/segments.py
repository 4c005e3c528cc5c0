"""EnCodec 48 kHz's segments: the input is cut into 1 s segments (48000 samples) every 47520
samples (1 % overlap), each scaled to unit rms (of its channels' mean) and encoded alone, its
scale kept beside its codes (Codes.scales); decoding decodes each segment (their LSTMs as one
batch: Decoder.forward_many), multiplies it by its scale and overlap-adds the segments with
triangular weights (the package's _linear_overlap_add).
The codes of an item are its segments' codes one after another: 150 frames a whole segment, a
shorter one ceil(its samples / 320); the segments of T frames are known from T alone."""

from __future__ import annotations

import copy
import itertools
import math

import torch

from ... import chunking
from ...errors import CodesError
from .config import EncodecConfig


def layout(cfg: EncodecConfig) -> tuple[int, int, int]:
    """(samples a segment, samples between segment starts, frames a whole segment)."""
    length = int(cfg.segment * cfg.sample_rate)
    stride = max(1, int((1 - cfg.overlap) * length))
    return length, stride, math.ceil(length / cfg.hop_length)


def frame_rule(cfg: EncodecConfig) -> str:
    """The codec's frame rule (chunking.frames_for): segments, each ceil(samples / hop)."""
    length, stride, _ = layout(cfg)
    return f"segments:{length}:{stride}"


def frames_of(cfg: EncodecConfig, samples: int) -> list[int]:
    """Frames of each segment of an item of `samples` samples."""
    length, stride, _ = layout(cfg)
    return chunking.segment_frames(samples, length, stride, cfg.hop_length)


def segment_frames(cfg: EncodecConfig, frames: int) -> list[int]:
    """Frames of each segment of an item of `frames` frames, from the frame count alone
    (chunking.frame_segments: a segment of 48000 samples is 150 whole frames, so a frame count
    fixes where the last segments end; tests/models/encodec/test_48khz.py checks every length
    up to 2 s)."""
    length, stride, _ = layout(cfg)
    return chunking.frame_segments(frames, length, stride, cfg.hop_length)


def decoded_samples(cfg: EncodecConfig, frames: int) -> int:
    """Samples the overlap-add of an item of `frames` frames gives."""
    return chunking.segments_span(segment_frames(cfg, frames), layout(cfg)[1], cfg.hop_length)


def encode(model, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [B, K, T], scales [B, S]) of audio [B, C, N] (items of one length)."""
    length, stride, _ = layout(model.config)
    codes, scales = zip(*(encode_segment(model, audio[..., start : start + length])
                          for start in range(0, audio.shape[-1], stride)), strict=True)
    return torch.cat(codes, -1), torch.stack(scales, 1)


def encode_segment(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [B, K, t], scales [B]) of one segment x [B, C, n]: scaled to unit rms of its
    channels' mean (+ 1e-8), as the package's _encode_frame."""
    if not model.config.normalize:
        return model.encode(x), torch.ones(x.shape[0], device=x.device)
    scale = x.mean(1, keepdim=True).pow(2).mean(2, keepdim=True).sqrt() + 1e-8
    return model.encode(x / scale), scale.view(-1)


# segments decoded together (their LSTMs as one batch: Decoder.forward_many), a bound on the
# memory of a long input's
DECODE_GROUP = 16


def decode(model, codes: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """Audio [B, C, decoded_samples(T)] of codes [B, k, T] (items of one length) and their
    segments' scales [B, S] (None: not scaled, as the package decodes a segment without one)."""
    cfg = model.config
    layout_ = segment_frames(cfg, codes.shape[-1])
    if scales is not None and scales.shape[1] < len(layout_):
        raise CodesError(f"{codes.shape[-1]} frames are {len(layout_)} segments; the codes "
                         f"carry {scales.shape[1]} segment scales")
    starts = [0, *itertools.accumulate(layout_)]
    mix = OverlapAdd(layout(cfg)[1], decoded_samples(cfg, codes.shape[-1]))
    for first in range(0, len(layout_), DECODE_GROUP):
        group = range(first, min(first + DECODE_GROUP, len(layout_)))
        latents = [model.latents(codes[..., starts[s] : starts[s] + layout_[s]]) for s in group]
        for s, out in zip(group, model.decoder.forward_many(latents), strict=True):
            mix.add(_scaled(out, None if scales is None else scales[:, s]))
    return mix.take(mix.end)


def decode_segment(model, codes: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """Audio [B, C, 320 t] of one segment's codes [B, k, t], times its scales [B] (if any)."""
    return _scaled(model.decode(codes), scales)


def _scaled(out: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """out (in float32: the overlap-add's triangle needs its precision) times the scales."""
    out = out.float()
    return out if scales is None else out * scales.view(-1, 1, 1).to(out)


class OverlapAdd:
    """Pieces, each starting `stride` after the previous, weighted by a triangle over the
    first piece's length (0.5 - |t - 0.5|, t on (0, 1) without its ends) and divided by the
    sum of the weights, as the package computes it; take() returns the samples so far, so a
    stream puts out what no later piece reaches. The package sizes the sum by the last piece,
    which fails when the one before reaches further (its last segment 1 frame, the one before
    150 frames but shorter than a whole segment: e.g. 47681-47840 samples); here the sum spans
    every piece."""

    def __init__(self, stride: int, size: int | None = None):
        self.stride = stride
        self.size = size  # the samples all pieces will span, if known: the sums made once
        self.pieces = 0
        self.taken = 0  # samples returned so far
        self.weight = self.out = self.weights = None  # the triangle; sums from `taken` on

    def add(self, piece: torch.Tensor) -> None:
        if self.weight is None:
            t = torch.linspace(0, 1, piece.shape[-1] + 2, device=piece.device,
                               dtype=piece.dtype)[1:-1]
            self.weight = 0.5 - (t - 0.5).abs()
            size = self.size or 0
            self.out = piece.new_zeros(*piece.shape[:-1], size)
            self.weights = self.weight.new_zeros(size)
        n, at = piece.shape[-1], self.pieces * self.stride - self.taken
        grow = at + n - self.weights.shape[-1]
        if grow > 0:
            self.out = torch.cat([self.out, self.out.new_zeros(*self.out.shape[:-1], grow)], -1)
            self.weights = torch.cat([self.weights, self.weights.new_zeros(grow)])
        self.out[..., at : at + n] += self.weight[:n] * piece
        self.weights[at : at + n] += self.weight[:n]
        self.pieces += 1

    def copy(self) -> OverlapAdd:
        """An independent copy (add() writes its sums in place)."""
        other = copy.copy(self)
        if self.out is not None:
            other.out, other.weights = self.out.clone(), self.weights.clone()
        return other

    @property
    def final(self) -> int:
        """Samples (from the start) that no later piece reaches: up to the next one's start."""
        return self.pieces * self.stride

    @property
    def end(self) -> int:
        """Samples the pieces so far span."""
        return self.taken + (0 if self.weights is None else self.weights.shape[-1])

    def take(self, upto: int) -> torch.Tensor:
        """The samples from the last take() up to `upto`, each divided by its weights."""
        n = max(0, upto - self.taken)
        out = self.out[..., :n] / self.weights[:n]
        self.out, self.weights = self.out[..., n:], self.weights[n:]
        self.taken += n
        return out
