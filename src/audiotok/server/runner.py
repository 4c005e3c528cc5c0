"""A Runner drives one model's streams of one kind (decode or encode) through its codec's
Streamer (streaming/): it owns each stream's row (its state), takes a step's input out of the
streams, and runs the step."""

from __future__ import annotations

import numpy as np
import torch

from ..streaming import Streamer, TokenChunk, open_streamer
from ..streaming.spec import STEPS, WINDOWS, Window
from .settings import EngineSettings
from .streams import DecodeStream, EncodeStream, Stream


class Runner:
    """The streams of one model and kind. mode: what clients are told (exact, stateful,
    windowed, segments); paced: see scheduler.py."""

    def __init__(self, codec, kind: str, settings: EngineSettings):
        self.codec, self.kind = codec, kind
        window = None
        spec = codec.streaming
        if kind == "decode" and spec.decode in (STEPS, WINDOWS) and \
                (settings.window is not None or spec.decode == WINDOWS):
            w = settings.window or spec.window
            own = spec.window
            window = Window(w.left, w.chunk, w.lookahead, own.align,
                            exact=settings.window is None and own.exact)
        self.streamer: Streamer = open_streamer(
            codec, kind, window=window, capacity=settings.max_streams,
            graphs=codec.graphs is not None, max_frames=settings.max_step_frames)
        self.rows: dict[int, object] = {}  # stream id -> its row
        self.first_audio: dict[int, np.ndarray] = {}  # stream id -> audio held back (below)

    @property
    def mode(self) -> str:
        return self.streamer.mode

    @property
    def paced(self) -> bool:
        return self.streamer.paced

    @property
    def unit_frames(self) -> int:
        return 1 if self.kind == "decode" else self.codec.input_samples_per_frame

    def admit(self, s: Stream) -> bool:
        """A row for a new stream; False when there is no room now."""
        row = self.streamer.new(**s.conditioning)
        if row is None:
            return False
        self.rows[s.id] = row
        return True

    def has_row(self, s: Stream) -> bool:
        return s.id in self.rows

    def row(self, s: Stream):
        return self.rows[s.id]

    def release(self, s: Stream) -> None:
        self.first_audio.pop(s.id, None)
        row = self.rows.pop(s.id, None)
        if row is not None:
            if isinstance(s, EncodeStream) and self.codec.streaming.scales:
                s.final_scales = self.streamer.scales(row)[0].numpy()  # still read after
            self.streamer.free(row)

    def room(self) -> int | None:
        return self.streamer.room()

    def close(self) -> None:
        for row in self.rows.values():
            self.streamer.free(row)
        self.rows.clear()
        self.streamer.close()

    def ready(self, s: Stream) -> int | None:
        """Input units the stream's row would take now (None: not ready, or done)."""
        row = self.rows.get(s.id)
        if row is None:
            return None
        scales = len(s.scales_pending) if isinstance(s, DecodeStream) else 0
        return self.streamer.take(row, s.held, s.state == "finishing", scales)

    def gather(self, s: Stream, units: int) -> tuple[object, bool]:
        """Take `units` input units (and a decode stream's scales) out of the stream: the step's
        input and whether it ends the stream (engine lock held)."""
        ending = s.state == "finishing" and units == s.held
        if isinstance(s, DecodeStream):
            tokens = s.take(units) if units else \
                torch.zeros(self.codec.num_codebooks, 0, dtype=torch.long)
            scales = None
            if s.scales_pending:
                scales = torch.from_numpy(np.concatenate(s.scales_pending))[None]
                s.scales_pending.clear()
            return TokenChunk(tokens[None], scales), ending
        assert isinstance(s, EncodeStream)
        x = s.take_samples(units)
        return torch.from_numpy(x).reshape(1, self.codec.channels, -1), ending

    def run(self, streams: list[Stream], inputs: list, ending: list[bool]) -> list[np.ndarray]:
        """Each stream's output (numpy, its row 0) of one step over all of them; raises if the
        step fails, leaving every row as it was (the engine retries stream by stream)."""
        rows = [self.rows[s.id] for s in streams]
        return self._outputs(streams, self.streamer.step(rows, inputs, ending), ending)

    def _outputs(self, streams: list[Stream], outputs: list[torch.Tensor],
                 ending: list[bool]) -> list[np.ndarray]:
        out = []
        for s, y, end in zip(streams, outputs, ending, strict=True):
            y = y[0].float().cpu().numpy() if self.kind == "decode" else y[0].cpu().numpy()
            if self.kind == "decode":
                y = y[0] if self.codec.channels == 1 else y
                if not self.streamer.whole_frames:
                    y = self._first_chunk(s, y, end)
            out.append(y)
        return out

    def _first_chunk(self, s: DecodeStream, audio: np.ndarray, end: bool) -> np.ndarray:
        """A stream's first audio waits until a frame's worth is final (samples_per_frame), so
        that a player starting at the first audio has that much in hand while the next frame's
        codes come (its first samples alone would be a few ms ahead of the next ones)."""
        if s.samples_out:
            return audio
        held = self.first_audio.pop(s.id, None)
        held = audio if held is None else np.concatenate([held, audio], -1)
        if held.shape[-1] < self.codec.samples_per_frame and not end:
            self.first_audio[s.id] = held
            return audio[..., :0]
        return held

    def scales(self, s: EncodeStream) -> np.ndarray:
        """The scales [S] of the segments an encode stream has encoded (codes that carry them)."""
        row = self.rows.get(s.id)
        if row is None:
            return np.zeros(0, np.float32) if s.final_scales is None else s.final_scales
        return self.streamer.scales(row)[0].numpy()

    def warm_shapes(self, rows: int, max_frames: int) -> list[tuple[int, int]]:
        return self.streamer.warm_shapes(rows, max_frames)

    def warm_rows(self, rows: list, frames: int) -> None:
        """A step of silence on scratch rows (Engine's warm-up takes and frees them)."""
        with torch.inference_mode():
            self.streamer.warm_rows(rows, frames)
