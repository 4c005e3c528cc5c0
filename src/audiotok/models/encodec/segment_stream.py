"""EnCodec 48 kHz as streams, segment by segment (segments.py): each segment is encoded and
decoded whole, as offline, so an encode stream equals the offline result exactly and a decode
stream within 1e-5 (the offline decode runs several segments' LSTMs as one batch, whose sums
round their own way; a stream decodes each segment alone); the latency is a segment (1 s).

Encoding: a segment's tokens (150 frames) and its scale come once its 48000 samples are in;
at the end, the segments that start before it (the last ones shorter) as the offline encode
cuts them. Decoding: a segment's audio once its frames and its scale are in and the frame after
it (only a last segment, or one followed by a last of 1 or 2 frames, is shorter than 150
frames, so the frame after a segment's 150th fixes it), up to the next segment's start (its
last 480 samples wait for the next segment's overlap); at the end, the rest as the offline
decode lays out that many frames.
"""

from __future__ import annotations

import copy

import torch

from ...errors import CodesError
from .segments import OverlapAdd, decode_segment, encode_segment, layout, segment_frames


class SegmentEncoderStream:
    """push(audio [B, C, n]) -> tokens [B, K, t] of the segments now whole; finish() -> the
    rest; `scales` [B, S]: every segment's scale so far."""

    def __init__(self, model):
        self.model = model
        self.length, self.stride, _ = layout(model.config)
        self.pending: torch.Tensor | None = None  # the audio from the next segment's start
        self.start = 0  # the next segment's first sample
        self.samples = 0
        self._scales: list[torch.Tensor] = []

    def push(self, audio: torch.Tensor) -> torch.Tensor:
        audio = audio.float()  # scaled to unit rms before the model casts it, as offline
        self.samples += audio.shape[-1]
        self.pending = audio if self.pending is None else torch.cat([self.pending, audio], -1)
        codes = []
        while self.pending.shape[-1] >= self.length:
            codes.append(self._segment(self.pending[..., : self.length]))
            self.pending, self.start = self.pending[..., self.stride :], self.start + self.stride
        return self._tokens(codes)

    def finish(self) -> torch.Tensor:
        codes = []
        for start in range(self.start, self.samples, self.stride):
            at = start - self.start
            codes.append(self._segment(self.pending[..., at : at + self.length]))
        self.pending, self.start = None, self.samples
        return self._tokens(codes)

    def copy(self) -> SegmentEncoderStream:
        """An independent copy (a server's stream advances a copy, kept once a step is done)."""
        other = copy.copy(self)
        other._scales = list(self._scales)
        return other

    @property
    def scales(self) -> torch.Tensor | None:
        return torch.stack(self._scales, 1) if self._scales else None

    def _segment(self, x: torch.Tensor) -> torch.Tensor:
        codes, scale = encode_segment(self.model, x)
        self._scales.append(scale)
        return codes

    def _tokens(self, codes: list[torch.Tensor]) -> torch.Tensor:
        if codes:
            return torch.cat(codes, -1)
        batch = 1 if self.pending is None else self.pending.shape[0]
        return torch.zeros(batch, self.model.encode_levels, 0, dtype=torch.long)


class SegmentDecoderStream:
    """push(tokens [B, k, t], scales [B, j] of the next j segments) -> audio [B, C, n] now
    final; finish() -> the rest. A segment waits for its scale (push ones to decode without)."""

    def __init__(self, model):
        self.model = model
        _, stride, self.whole = layout(model.config)
        self.codes: torch.Tensor | None = None  # the frames of segments not yet decoded
        self.frames = 0
        self.segments = 0  # segments decoded
        self.given: list[torch.Tensor] = []  # each segment's scales [B], as pushed
        self.mix = OverlapAdd(stride)

    def push(self, tokens: torch.Tensor, scales: torch.Tensor | None = None) -> torch.Tensor:
        self.codes = tokens if self.codes is None else torch.cat([self.codes, tokens], -1)
        self.frames += tokens.shape[-1]
        if scales is not None:
            self.given.extend(scales.to(tokens.device).unbind(1))
        while self.codes.shape[-1] > self.whole and len(self.given) > self.segments:
            self._decode(self.whole)
        return self._take(self.mix.final)

    def finish(self) -> torch.Tensor:
        if self.frames:
            rest = segment_frames(self.model.config, self.frames)
            if rest[: self.segments] != [self.whole] * self.segments:
                raise RuntimeError(f"segments decoded as whole, but {self.frames} frames are "
                                   f"segments of {rest}")
            for n in rest[self.segments :]:
                if len(self.given) <= self.segments:
                    raise CodesError(f"segment {self.segments} has no scale: push the scales "
                                     "of every segment (ones to decode without)")
                self._decode(n)
        return self._take(self.mix.end)

    def copy(self) -> SegmentDecoderStream:
        """An independent copy (a server's stream advances a copy, kept once a step is done)."""
        other = copy.copy(self)
        other.given, other.mix = list(self.given), self.mix.copy()
        return other

    def _decode(self, frames: int) -> None:
        self.mix.add(decode_segment(self.model, self.codes[..., :frames],
                                    self.given[self.segments]))
        self.codes = self.codes[..., frames:]
        self.segments += 1

    def _take(self, upto: int) -> torch.Tensor:
        if self.mix.pieces:
            return self.mix.take(upto)
        batch = 1 if self.codes is None else self.codes.shape[0]
        return torch.zeros(batch, self.model.config.channels, 0)
