"""Windowed re-decoding ("windows", and a "steps" decoder asked for a shorter lookahead): each
step decodes a window of `left` frames already output, the frames it outputs and `lookahead`
frames after them, and keeps the audio of the frames it outputs. Every frame's samples come out
once; where the decoder reaches no farther than the window (Window.exact) the audio equals the
offline decode. The windows of several rows go as one padded batch (padding never changes an
item: the codec masks it), each told where it starts in its stream (a decoder's noise may
depend on the absolute frame)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..chunking import window_start
from ..codes import Codes
from ..errors import AudiotokError
from .base import Streamer, TokenChunk
from .spec import Window


@dataclass
class WindowRow:
    history: torch.Tensor  # [rows, K, n]: the tokens from `start` on
    start: int = 0  # the stream frame history[..., 0] is
    frames: int = 0  # frames pushed
    emitted: int = 0  # frames whose audio is out
    ended: bool = False
    globals: torch.Tensor | None = None  # [rows, G]: the utterance tokens (Codes.globals)


def lookahead_needed(codec) -> int:
    """Frames a window must reach past the audio it keeps: 1 for a codec whose decode of T
    frames is shorter than T whole frames (the last frame's end needs the next one), else 0."""
    one = int(codec.audio_lengths(torch.tensor([1]))[0])
    return int(one < codec.samples_per_frame)


def check_window(codec, window: Window) -> None:
    """ValueError unless windows of this lookahead keep whole frames."""
    need = lookahead_needed(codec)
    if window.lookahead < need:
        raise ValueError(f"{codec.title} needs a lookahead of at least {need} frame (a frame's "
                         f"last samples depend on the next), got {window.lookahead}")


class WindowStreamer(Streamer):
    """Windows of `window` (chunk None: each step outputs every frame that has `lookahead`
    frames after it)."""

    mode = "windowed"
    paced = False

    def __init__(self, codec, window: Window):
        super().__init__(codec)
        check_window(codec, window)
        self.window = window

    def new(self, rows: int = 1, globals: torch.Tensor | None = None) -> WindowRow:
        """globals [rows, G]: the utterance tokens every window decodes with, for a codec
        that has them (checked: Codec.check_globals)."""
        return WindowRow(torch.zeros(rows, self.codec.num_codebooks, 0, dtype=torch.long),
                         globals=globals)

    def take(self, row: WindowRow, waiting: int, ending: bool, scales: int = 0) -> int | None:
        if row.ended:
            return None
        if ending:
            return waiting if waiting or row.emitted < row.frames else None
        w = self.window
        new = row.frames + waiting - row.emitted
        if w.chunk is None:
            return waiting if waiting else None
        return waiting if new >= w.chunk + w.lookahead else None

    def step(self, rows: list[WindowRow], inputs: list, ending: list[bool]) -> list[torch.Tensor]:
        w, codec = self.window, self.codec
        plans = []
        for row, x, end in zip(rows, inputs, ending, strict=True):
            tokens = (x.tokens if isinstance(x, TokenChunk) else x).cpu().long()
            history = torch.cat([row.history, tokens], -1)
            frames = row.frames + tokens.shape[-1]
            ready = frames - row.emitted if end else frames - w.lookahead - row.emitted
            if not end and ready > 0:
                ready -= ready % w.align
            count = max(0, ready if w.chunk is None else min(w.chunk, ready))
            plans.append((history, frames, count))
        windows, out = [], [None] * len(rows)
        for i, (row, (history, frames, count)) in enumerate(zip(rows, plans, strict=True)):
            if count == 0:
                out[i] = self.empty(history.shape[0])
                continue
            first = window_start(row.emitted, w.left, w.align)
            stop = min(frames, row.emitted + count + w.lookahead)
            windows.append((i, history[..., first - row.start : stop - row.start], first,
                            row.emitted - first, count, row.globals))
        if windows:
            audio = self._decode(windows)
            spf = codec.samples_per_frame
            for (i, tokens, _, offset, count, _), a in zip(windows, audio, strict=True):
                # (a window's audio ends where its decode does: short of whole frames for some
                # codecs, zeros after that in a batch of longer windows)
                end = int(codec.audio_lengths(torch.tensor([tokens.shape[-1]]))[0])
                out[i] = a[..., offset * spf : min((offset + count) * spf, end)]
        for row, (history, frames, count), end in zip(rows, plans, ending, strict=True):
            row.emitted += count
            keep = window_start(row.emitted, w.left, w.align)  # the next window's start
            row.history, row.start = history[..., keep - row.start :], keep
            row.frames = frames
            row.ended = end and row.emitted == frames
        return out

    def _decode(self, windows: list) -> list[torch.Tensor]:
        """Each window's audio [rows, C, n], all windows decoded as one padded batch."""
        codec = self.codec
        items = [(tokens[r], first, None if g is None else g[r])
                 for _, tokens, first, _, _, g in windows for r in range(tokens.shape[0])]
        lengths = [t.shape[-1] for t, _, _ in items]
        batch = torch.zeros(len(items), codec.num_codebooks, max(lengths), dtype=torch.long)
        for j, (t, _, _) in enumerate(items):
            batch[j, :, : t.shape[-1]] = t
        codes = Codes(batch, torch.tensor(lengths), codec=codec.name,
                      sample_rate=codec.sample_rate, samples_per_frame=codec.samples_per_frame,
                      globals=torch.stack([g for _, _, g in items]) if codec.global_tokens
                      else None)
        audio = codec.decode(codes, frame_offsets=[first for _, first, _ in items])
        out, at = [], 0
        for _, tokens, _, _, _, _ in windows:
            out.append(audio[at : at + tokens.shape[0]])
            at += tokens.shape[0]
        return out

    def warm_shapes(self, rows: int, max_frames: int) -> list[tuple[int, int]]:
        """One full window of one stream."""
        w = self.window
        return [(1, w.left + (w.chunk or 1) + w.lookahead)]

    def warm_rows(self, rows: list, frames: int) -> None:
        codec = self.codec
        tokens = torch.zeros(1, codec.num_codebooks, frames, dtype=torch.long)
        codec.decode(tokens, globals=torch.zeros(1, codec.global_tokens, dtype=torch.long)
                     if codec.global_tokens else None)


def library_window(codec, window) -> Window:
    """A stream_decoder's window: (left, lookahead) frames given, or the codec's own; every
    ready frame out at each push."""
    own = codec.streaming.window
    if window is None:
        return Window(own.left, None, own.lookahead, own.align, own.exact)
    if (not isinstance(window, tuple | list) or len(window) != 2
            or not all(isinstance(v, int) and v >= 0 for v in window)):
        raise ValueError(f"window must be (left, lookahead) frames >= 0, got {window!r}")
    if own is None:
        raise AudiotokError(f"{codec.title} streams without windows: window= does not apply")
    return Window(window[0], None, window[1], own.align)
