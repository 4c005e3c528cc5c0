"""Streams of a codec that works in whole segments, each with a scale ("segments", codes that
carry scales), or in a family's own chunks ("chunks"): a segment or chunk is encoded or decoded
whole once its input (and, decoding, its scale) is in, so each row runs alone (two rows rarely
complete one in the same step), unless the family's stream type offers
push_together(streams, tokens, ending) (S3's chunks: the flows of every stream's ready chunk as
the rows of one call). A step advances a copy of each row's stream, kept once every row has run.
The family's stream object (Codec.segment_stream) does the work: push(...) -> what became
final, finish() -> the rest, copy()."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Streamer, TokenChunk


@dataclass
class SegmentRow:
    rows: int
    inner: object = None  # the family's segment stream (Codec.segment_stream)
    ended: bool = False


class SegmentStreamer(Streamer):
    paced = False
    whole_frames = False

    def __init__(self, codec, direction: str, mode: str = "segments"):
        super().__init__(codec)
        self.direction, self.mode = direction, mode

    def new(self, rows: int = 1, **conditioning) -> SegmentRow:
        return SegmentRow(rows, self.codec.segment_stream(self.direction, **conditioning))

    def take(self, row: SegmentRow, waiting: int, ending: bool, scales: int = 0) -> int | None:
        if row.ended:
            return None
        if self.direction == "decode":
            return waiting if waiting or scales or ending else None
        whole = waiting - waiting % self.codec.input_samples_per_frame
        return waiting if ending else (whole or None)

    def step(self, rows: list[SegmentRow], inputs: list, ending: list[bool]) -> list[torch.Tensor]:
        new = [row.inner.copy() for row in rows]
        together = getattr(type(new[0]), "push_together", None) if new else None
        with torch.inference_mode():
            if together is not None and self.direction == "decode":
                device = self.codec.device
                out = together(new, [_chunk(x).tokens.to(device) for x in inputs], ending)
            else:
                out = [self._advance(inner, x, end)
                       for inner, x, end in zip(new, inputs, ending, strict=True)]
        for row, inner, end in zip(rows, new, ending, strict=True):
            row.inner, row.ended = inner, row.ended or end
        return out

    def _advance(self, inner, x, end: bool) -> torch.Tensor:
        device = self.codec.device
        if self.direction == "decode":
            chunk = _chunk(x)
            y = inner.push(chunk.tokens.to(device), chunk.scales)
        else:
            y = inner.push(x.to(device)) if x.shape[-1] else None
        if end:
            rest = inner.finish()
            y = rest if y is None else torch.cat([y, rest], -1)
        return self.empty(1) if y is None else y

    def scales(self, row: SegmentRow) -> torch.Tensor:
        """The scales [rows, S] of the segments an encode stream has encoded so far."""
        got = row.inner.scales
        return torch.zeros(row.rows, 0) if got is None else \
            got.float().cpu().expand(row.rows, -1)

    def warm_shapes(self, rows: int, max_frames: int) -> list[tuple[int, int]]:
        """A segment codec warms one segment; a chunk stream (which decodes in a voice that
        only its streams bring) warms nothing."""
        return [] if self.mode == "chunked" else [(1, 1)]

    def warm_rows(self, rows: list, frames: int) -> None:
        """One whole segment of silence, to its end."""
        codec = self.codec
        if self.direction == "decode":
            n = codec.num_frames(codec.sample_rate) + 1  # a second and a frame
            x = TokenChunk(torch.zeros(1, codec.num_codebooks, n, dtype=torch.long),
                           torch.ones(1, 2))
        else:
            x = torch.zeros(1, codec.channels, codec.input_rate)
        self.step(rows[:1], [x], [True])


def _chunk(x) -> TokenChunk:
    return x if isinstance(x, TokenChunk) else TokenChunk(x)
