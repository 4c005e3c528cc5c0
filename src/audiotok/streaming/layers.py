"""Streams of a causal codec ("layers"): every layer keeps its own state, so each frame runs once
and a stream equals the offline result exactly; the rows of any streams, of any ages, run as
one batch (slots.py), each with its own number of frames."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..nn.kernels import packed_weights
from .base import Streamer, TokenChunk
from .graphs import GraphedSteps, bucket_sizes
from .slots import SlotTable


@dataclass
class LayerRow:
    slots: list[int]  # one table slot per row
    ended: bool = False
    frames: list[int] = field(default_factory=list)  # (scratch: a step's frames per row)


class LayerStreamer(Streamer):
    """capacity: rows at most (table slots); graphs: replay steps as CUDA graphs; max_frames:
    the most frames a step gives a row (the graphs' frame buckets)."""

    mode = "exact"

    def __init__(self, codec, direction: str, capacity: int, *, graphs: bool = False,
                 max_frames: int = 8):
        super().__init__(codec)
        self.direction = direction
        self.copies = codec.stream_copies()
        self.model = self.copies.take()
        self.table = SlotTable(self.model, lambda m: m.stream_roots(direction), capacity,
                               codec.device)
        self.max_frames = max_frames
        self.graphs: GraphedSteps | None = None
        if graphs:
            self.use_graphs()

    def use_graphs(self, capture=None) -> None:
        """Replay the steps as CUDA graphs from now on (graphs.py; `capture` replaces the CUDA
        capture, for tests)."""
        self.graphs = GraphedSteps(self.table, self._call, self._frames_of, self.max_frames,
                                   capture)

    def _call(self, model, x: torch.Tensor) -> torch.Tensor:
        return model.decode(x) if self.direction == "decode" else model.encode(x)

    def _frames_of(self, x: torch.Tensor) -> int:
        if self.direction == "decode":
            return x.shape[-1]
        return -(-x.shape[-1] // self.codec.input_samples_per_frame)

    def close(self) -> None:
        if self.model is not None and self.graphs is None:
            self.copies.give(self.model)
        self.model = None

    def new(self, rows: int = 1) -> LayerRow | None:
        slots = []
        while len(slots) < rows and (slot := self.table.acquire()) is not None:
            slots.append(slot)
        if len(slots) < rows:
            for slot in slots:
                self.table.release(slot)
            return None
        return LayerRow(slots)

    def room(self) -> int:
        return len(self.table.free)

    def free(self, row: LayerRow) -> None:
        for slot in row.slots:
            self.table.release(slot)
        row.slots = []

    def take(self, row: LayerRow, waiting: int, ending: bool, scales: int = 0) -> int | None:
        if row.ended or waiting == 0:
            return None
        if self.direction == "decode":
            return waiting
        whole = waiting - waiting % self.codec.input_samples_per_frame
        return whole if whole else (waiting if ending else None)

    def step(self, rows: list[LayerRow], inputs: list, ending: list[bool]) -> list[torch.Tensor]:
        if self.direction == "decode":
            xs = [x.tokens if isinstance(x, TokenChunk) else x for x in inputs]
            return self._run(rows, xs, ending)
        spf = self.codec.input_samples_per_frame
        inputs = list(inputs)
        out: list[torch.Tensor | None] = [None] * len(rows)
        whole = []
        for i, x in enumerate(inputs):
            if x.shape[-1] % spf == 0:
                whole.append(i)
            elif self.codec.streaming.end_padding == "zeros":  # completed as offline
                inputs[i] = F.pad(x, (0, -x.shape[-1] % spf))
                whole.append(i)
            else:  # each convolution pads its own input at the end: the row alone, unpadded
                out[i] = self._run([rows[i]], [x], [ending[i]])[0]
        if whole:
            for i, y in zip(whole, self._run([rows[i] for i in whole],
                                             [inputs[i] for i in whole],
                                             [ending[i] for i in whole]), strict=True):
                out[i] = y
        return out

    def _run(self, rows: list[LayerRow], xs: list[torch.Tensor], ending: list[bool]
             ) -> list[torch.Tensor]:
        """One model call over every row of `rows` (each padded to the longest input)."""
        slots = [s for row in rows for s in row.slots]
        frames = [self._frames_of(x) for x in xs for _ in range(x.shape[0])]
        per_row = [self._frames_of(x) for x in xs]
        total = max(frames)
        if len(xs) == 1:  # (a library stream, a piece of a long input: no padded copy)
            batch = xs[0]
        else:
            length = max(x.shape[-1] for x in xs)
            batch = xs[0].new_zeros(len(slots), *xs[0].shape[1:-1], length)
            at = 0
            for x in xs:
                batch[at : at + x.shape[0], ..., : x.shape[-1]] = x
                at += x.shape[0]
        with torch.inference_mode():
            batch = batch.to(self.codec.device)
            if self.graphs is not None:
                y = self.graphs.run(slots, frames, batch)
            else:
                with self.table.step(slots, frames, total) as model:
                    y = self._call(model, batch)
        for row, end in zip(rows, ending, strict=True):
            row.ended = row.ended or end
        out, at = [], 0
        per = self.codec.samples_per_frame if self.direction == "decode" else 1
        for x, n in zip(xs, per_row, strict=True):
            out.append(y[at : at + x.shape[0], ..., : n * per])
            at += x.shape[0]
        return out

    def warm_shapes(self, rows: int, max_frames: int) -> list[tuple[int, int]]:
        """With graphs, one step per (batch, frames) bucket, so that none is captured while
        serving; else warm_grid's shapes."""
        if self.graphs is not None:
            return [(b, f) for b in bucket_sizes(rows) for f in bucket_sizes(max_frames)]
        return warm_grid(rows, max_frames)


def warm_grid(rows: int, max_frames: int) -> list[tuple[int, int]]:
    """(streams, frames) a warm-up runs, (1, 1) first: every batch size at one frame, every
    frame count at one stream, then every batch size at two and at three frames. Two or three
    frames are what streams have waiting after steps ran late; unwarmed, such a step's first
    call builds oneDNN's kernels for the new shape, runs late again, and the lateness cascades
    (docs/serving.md, readiness)."""
    return ([(b, 1) for b in range(1, rows + 1)] + [(1, f) for f in range(2, max_frames + 1)]
            + [(b, f) for f in (2, 3) if max_frames >= f for b in range(2, rows + 1)])


def run_in_pieces(codec, direction: str, x: torch.Tensor, frames: int) -> torch.Tensor:
    """model.decode(tokens [B, K, T]) or model.encode(audio [B, 1, N]) of a causal codec run
    through its stream `frames` frames a step: the same result, activations of a piece's size.
    Inside packed_weights(False): a short last piece makes no packed weight copies."""
    streamer = LayerStreamer(codec, direction, x.shape[0])
    try:
        row = streamer.new(x.shape[0])
        size = frames if direction == "decode" else frames * codec.input_samples_per_frame
        pieces = x.split(size, -1)
        with packed_weights(False):
            if direction == "encode":
                return torch.cat([streamer.step([row], [p], [i == len(pieces) - 1])[0]
                                  for i, p in enumerate(pieces)], -1)
            spf = codec.samples_per_frame
            out = torch.empty(x.shape[0], codec.channels, x.shape[-1] * spf, device=x.device)
            for i, piece in enumerate(pieces):
                out[..., i * size * spf : (i * size + piece.shape[-1]) * spf] = \
                    streamer.step([row], [piece], [i == len(pieces) - 1])[0]
            return out
    finally:
        streamer.close()
