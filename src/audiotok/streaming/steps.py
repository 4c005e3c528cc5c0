"""Streams of a decoder (or encoder) that is not causal but reaches a fixed distance ahead
("steps"): each layer runs as a step that outputs what its input now fixes (nn/stream_steps.py),
so every frame runs once and the audio comes out as soon as it is final. Rows whose states
have the same shapes (their key) and that run as many frames go as one batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Streamer, TokenChunk
from .layers import warm_grid


@dataclass
class StepRow:
    rows: int
    inner: object = None  # the family's stream (DecoderStream / EncoderStream), made at once
    ended: bool = False


class StepStreamer(Streamer):
    """make(): the family's new stream of this direction (Codec.step_stream)."""

    mode = "stateful"
    whole_frames = False
    # frames (rows x frames per row) one batched call takes at most: past that the activations
    # outgrow the caches (benchmarks/serving/serve_engine.py; docs/codecs/snac.md)
    BATCH_FRAMES = 32

    def __init__(self, codec, direction: str):
        super().__init__(codec)
        self.direction = direction
        self.make = lambda: codec.step_stream(direction)
        self.warm_steps = 4 if direction == "decode" else 8

    def new(self, rows: int = 1) -> StepRow:
        return StepRow(rows, self.make())

    def take(self, row: StepRow, waiting: int, ending: bool, scales: int = 0) -> int | None:
        if row.ended:
            return None
        if self.direction == "decode":
            return waiting if waiting or ending else None
        whole = waiting - waiting % self.codec.input_samples_per_frame
        return waiting if ending else (whole or None)

    def step(self, rows: list[StepRow], inputs: list, ending: list[bool]) -> list[torch.Tensor]:
        """Rows of one width and key in batched calls (each new inner stream replaces its row's
        only once every row has run: a failed step leaves them as they were); a row that ends
        runs its input and its end alone (each layer's right padding)."""
        xs = [x.tokens if isinstance(x, TokenChunk) else x for x in inputs]
        xs = [x.to(self.codec.device, self._dtype()) if x.is_floating_point() else
              x.to(self.codec.device) for x in xs]
        new, out = [r.inner for r in rows], [None] * len(rows)
        groups: dict[tuple, list[int]] = {}
        for i, (row, x) in enumerate(zip(rows, xs, strict=True)):
            # (a row of several rows, a library stream's, runs alone: push_together takes one
            # row per stream)
            key = ("end", i) if ending[i] else ("alone", i) if row.rows > 1 else \
                ("rows", x.shape[-1], *row.inner.key())
            groups.setdefault(key, []).append(i)
        with torch.inference_mode():
            for key, members in groups.items():
                if key[0] in ("end", "alone"):
                    i = members[0]
                    new[i] = rows[i].inner.copy()
                    head = new[i].push(xs[i]) if xs[i].shape[-1] else None
                    if key[0] == "alone":
                        out[i] = self.empty(rows[i].rows) if head is None else head
                        continue
                    rest = new[i].finish()
                    out[i] = rest if head is None else torch.cat([head, rest], -1)
                    continue
                if key[1] == 0:  # nothing to run
                    for i in members:
                        out[i] = self.empty(rows[i].rows)
                    continue
                frames = max(1, self._frames(key[1]))
                per_call = max(1, self.BATCH_FRAMES // frames)
                for a in range(0, len(members), per_call):
                    part = members[a : a + per_call]
                    x = torch.cat([xs[i] for i in part])
                    done = type(rows[part[0]].inner).push_together(
                        [rows[i].inner for i in part], x)
                    for i, (inner, y) in zip(part, done, strict=True):
                        new[i], out[i] = inner, y
        for row, inner, end in zip(rows, new, ending, strict=True):
            row.inner, row.ended = inner, row.ended or end
        return out

    def _frames(self, width: int) -> int:
        return width if self.direction == "decode" else \
            width // self.codec.input_samples_per_frame

    def _dtype(self) -> torch.dtype:
        return self.codec.dtype

    def warm_shapes(self, rows: int, max_frames: int) -> list[tuple[int, int]]:
        return warm_grid(rows, max_frames)
