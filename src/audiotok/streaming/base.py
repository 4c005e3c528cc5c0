"""The one streaming protocol: a Streamer advances the rows of many streams of one codec in one
direction, and the library's stream_decoder()/stream_encoder() and the server's engine both
drive it.

    streamer = open_streamer(codec, "decode")    # by the codec's StreamSpec
    row = streamer.new(rows)                      # admit a stream of `rows` rows (its state;
                                                  # a voice too: new(rows, voice=v))
    n = streamer.take(row, waiting, ending)       # input units a step runs now (None: not yet)
    outs = streamer.step([row, ...], [x, ...], [ending, ...])   # rows together where possible
    streamer.free(row)                            # evict: its state goes
    streamer.close()                              # the streamer's own resources

A decode step's input is a TokenChunk (tokens [rows, K, t], and the next segments' scales for
codes that carry them), its output audio [rows, C, n]; an encode step's input is audio
[rows, C, n] at the codec's input rate, its output tokens [rows, K, t]. An output holds what
the input made final (possibly nothing); with `ending` the input is the stream's last and the
output holds everything left. A step that fails leaves every row's state as it was, so a batch
can be retried row by row.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class TokenChunk(NamedTuple):
    tokens: torch.Tensor  # [rows, K, t], integer, checked
    scales: torch.Tensor | None = None  # [rows, j]: the next j segments' scales


class Streamer:
    """One direction of one codec's streams (see the module docstring). Implementations:
    layers.py, steps.py, windows.py, segments.py."""

    direction = "decode"  # or "encode"
    mode = ""  # what a server tells its clients: exact, stateful, windowed, segments
    # each row's work grows with the frames it runs, so a step evens them out (the engine's
    # lower median of waiting frames); False: a row takes all it has waiting
    paced = True
    # outputs come in whole frames (else as samples become final, any number)
    whole_frames = True

    def __init__(self, codec):
        self.codec = codec

    @property
    def unit(self) -> str:
        """What `waiting` counts: "frame" (decode) or "sample" (encode)."""
        return "frame" if self.direction == "decode" else "sample"

    def new(self, rows: int = 1, **conditioning):
        """A new stream's state for `rows` rows (None: no room now; see `room`); conditioning:
        what the codec decodes with (Codec.decode_conditioning, e.g. a voice), for the
        streamers of codecs that take it."""
        raise NotImplementedError

    def room(self) -> int | None:
        """How many more rows `new` can admit now (None: no limit)."""
        return None

    def free(self, row) -> None:
        """The row's stream is over: release what it holds."""

    def close(self) -> None:
        """Release the streamer's own resources (a model copy, slots)."""

    def take(self, row, waiting: int, ending: bool, scales: int = 0) -> int | None:
        """How many of `waiting` input units (and the `scales` segment scales waiting) a step
        runs for this row now; None when it is not ready (with `ending`: when it is done)."""
        raise NotImplementedError

    def step(self, rows: list, inputs: list, ending: list[bool]) -> list[torch.Tensor]:
        """Advance each row by its input (see the module docstring); one output per row."""
        raise NotImplementedError

    def warm_shapes(self, rows: int, max_frames: int) -> list[tuple[int, int]]:
        """(streams, frames) of the steps a server runs once before serving, (1, 1) first."""
        return [(1, 1)]

    def warm_rows(self, rows: list, frames: int) -> None:
        """Run a step of len(rows) rows of `frames` frames of silence each (rows: scratch rows
        the caller took with `new` and frees after)."""
        codec = self.codec
        for _ in range(self.warm_steps):
            if self.direction == "decode":
                x = TokenChunk(torch.zeros(1, codec.num_codebooks, frames, dtype=torch.long))
            else:
                x = torch.zeros(1, codec.channels, frames * codec.input_samples_per_frame)
            self.step(rows, [x] * len(rows), [False] * len(rows))

    warm_steps = 1  # steps a warm-up runs (past a stateful stream's start)

    def empty(self, rows: int) -> torch.Tensor:
        """An output of nothing for `rows` rows."""
        codec = self.codec
        if self.direction == "decode":
            return torch.zeros(rows, codec.channels, 0)
        return torch.zeros(rows, codec.num_codebooks, 0, dtype=torch.long)
