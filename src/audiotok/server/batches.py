"""How one engine step runs a batch of streams of one kind, and how offline requests batch.

Each runner has: `ready(stream)` (work waiting), `gather(streams)` (take that work out of the
streams, under the engine's lock) and `run(streams, work)` (the model call, outside the lock;
one output per stream).

A causal step pads every row to the same number of frames, so one stream with a long backlog (a
language model that runs ahead of real time) must not make every row of every step that long:
a step takes the lower median of the streams' waiting frames (at most `max_frames`), and a
stream with more waiting gets the rest in later steps.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import torch

from ..chunking import window_start
from ..codes import Codes
from .settings import WindowSettings
from .slots import GraphedSteps, SlotTable, bucket_sizes
from .streams import DecodeStream, EncodeStream


def warm_grid(rows: int, max_frames: int) -> list[tuple[int, int]]:
    """(streams, frames) a warm-up runs, (1, 1) first: every batch size at one frame, every
    frame count at one stream, then every batch size at two and at three frames. Two or three
    frames are what streams have waiting after steps ran late; unwarmed, such a step's first
    call builds oneDNN's kernels for the new shape, runs late again, and the lateness cascades
    (a full-size 12.5 Hz codec: at 12 streams C100 42 % without the two-frame shapes and 100 %
    with them; at 16 streams, with the three-frame shapes too, no step over 100 ms against 4-20
    per run without them; docs/serving.md, readiness)."""
    return ([(b, 1) for b in range(1, rows + 1)] + [(1, f) for f in range(2, max_frames + 1)]
            + [(b, f) for f in (2, 3) if max_frames >= f for b in range(2, rows + 1)])


def step_frames(waiting: list[int], limit: int) -> int:
    """Frames per row for a step whose streams have `waiting` frames each: their lower median,
    1 to `limit`."""
    return max(1, min(limit, sorted(waiting)[(len(waiting) - 1) // 2]))


class _Slotted:
    """A causal codec's streams of one kind in batch slots (SlotTable over the model's
    `stream_roots(kind)`)."""

    kind = ""

    def __init__(self, codec, capacity: int, max_frames: int):
        self.codec = codec
        self.max_frames = max_frames
        self.table = SlotTable(codec.model, lambda m: m.stream_roots(self.kind), capacity,
                               codec.device)
        self.graphs: GraphedSteps | None = None

    def use_graphs(self, capture=None) -> None:
        """Run the steps as CUDA graphs from now on (slots.GraphedSteps; `capture` replaces
        the CUDA capture, for tests)."""
        self.graphs = GraphedSteps(self.table, self._call, self._steps_of, self.max_frames,
                                   capture)

    def warm_shapes(self, rows: int) -> list[tuple[int, int]]:
        """(streams, frames) of the steps the warm-up runs with `rows` slots, (1, 1) first:
        every batch size at one frame and every frame count at one stream; with graphs, one step
        per (batch, frames) bucket, so that none is captured while serving."""
        if self.graphs is not None:
            return [(b, f) for b in bucket_sizes(rows) for f in bucket_sizes(self.max_frames)]
        return warm_grid(rows, self.max_frames)

    def _call(self, model, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _steps_of(self, x: torch.Tensor) -> int:
        return x.shape[-1]

    def _model_step(self, slots: list[int], frames: list[int], x: torch.Tensor) -> torch.Tensor:
        """The model's output for input x on the rows of `slots`; their state is advanced."""
        with torch.inference_mode():
            x = x.to(self.codec.device)
            if self.graphs is not None:
                return self.graphs.run(slots, frames, x)
            with self.table.step(slots, frames, self._steps_of(x)) as model:
                return self._call(model, x)

    def warm(self, slots: list[int], frames: int) -> None:
        """Run `frames` frames of silence on `slots` (Engine.start_warmup)."""
        self.run([SimpleNamespace(slot=s) for s in slots], [self._silence(frames)] * len(slots))


class CausalDecode(_Slotted):
    """A causal codec's decode streams in batch slots: every frame decoded once, exactly."""

    kind = "decode"
    mode = "exact"  # what /v1/models and a stream's "ready" say

    def ready(self, s: DecodeStream) -> bool:
        return s.held > 0

    def gather(self, streams: list[DecodeStream]) -> list[torch.Tensor]:
        n = step_frames([s.held for s in streams], self.max_frames)
        return [s.take(min(s.held, n)) for s in streams]

    def _silence(self, frames: int) -> torch.Tensor:
        return torch.zeros(self.codec.num_codebooks, frames, dtype=torch.long)

    def _call(self, model, tokens: torch.Tensor) -> torch.Tensor:
        return model.decode(tokens)

    def run(self, streams: list[DecodeStream], work: list[torch.Tensor]) -> list[np.ndarray]:
        frames = [w.shape[1] for w in work]
        total = max(frames)
        tokens = torch.zeros(len(work), self.codec.num_codebooks, total, dtype=torch.long)
        for i, w in enumerate(work):
            tokens[i, :, : w.shape[1]] = w
        audio = self._model_step([s.slot for s in streams], frames, tokens)
        audio = audio.float().cpu().numpy()
        spf = self.codec.samples_per_frame
        return [audio[i, 0, : n * spf] for i, n in enumerate(frames)]


class CausalEncode(_Slotted):
    """A causal codec's encode streams in batch slots: tokens as each frame's samples are
    complete."""

    kind = "encode"

    def ready(self, s: EncodeStream) -> bool:
        return s.frames_ready() > 0 or (s.state == "finishing" and s.held > 0)

    def gather(self, streams: list[EncodeStream]) -> list[np.ndarray]:
        n = step_frames([max(1, s.frames_ready()) for s in streams], self.max_frames)
        return [self._take(s, n) for s in streams]

    def _take(self, s: EncodeStream, limit: int) -> np.ndarray:
        n = s.frames_ready()
        if n > 0:
            return s.take(min(n, limit))
        tail = s.take_rest()  # finishing: the last partial frame, zero-padded
        return np.pad(tail, (0, self.codec.input_samples_per_frame - tail.shape[0]))

    def _silence(self, frames: int) -> np.ndarray:
        return np.zeros(frames * self.codec.input_samples_per_frame, np.float32)

    def _call(self, model, audio: torch.Tensor) -> torch.Tensor:
        return model.encode(audio)

    def _steps_of(self, audio: torch.Tensor) -> int:
        return audio.shape[-1] // self.codec.input_samples_per_frame

    def run(self, streams: list[EncodeStream], work: list[np.ndarray]) -> list[np.ndarray]:
        spf = self.codec.input_samples_per_frame
        frames = [w.shape[0] // spf for w in work]
        total = max(frames)
        audio = torch.zeros(len(work), 1, total * spf)
        for i, w in enumerate(work):
            audio[i, 0, : w.shape[0]] = torch.from_numpy(w)
        tokens = self._model_step([s.slot for s in streams], frames, audio).cpu().numpy()
        return [tokens[i, :, :n] for i, n in enumerate(frames)]


class WindowedDecode:
    """Decode streams of a non-causal codec: windows re-decoded with context (WindowSettings),
    padded windows of several streams in one batch (padding never changes an item: the codec
    masks it)."""

    mode = "windowed"

    def __init__(self, codec, window: WindowSettings):
        codec.check_lookahead(window.lookahead)
        self.codec = codec
        self.window = window

    def warm_shapes(self, rows: int) -> list[tuple[int, int]]:
        """One full window of one stream (Engine.start_warmup)."""
        w = self.window
        return [(1, w.left + w.chunk + w.lookahead)]

    def warm(self, slots: list, frames: int) -> None:
        tokens = torch.zeros(1, self.codec.num_codebooks, frames, dtype=torch.long)
        self.codec.decode(Codes(tokens, torch.tensor([frames]), codec=self.codec.name,
                                sample_rate=self.codec.sample_rate,
                                samples_per_frame=self.codec.samples_per_frame))

    def _available(self, s: DecodeStream) -> int:
        return s.history_start + s.history.shape[1] + s.held

    def ready(self, s: DecodeStream) -> bool:
        new = self._available(s) - s.emitted
        w = self.window
        return new >= w.chunk + w.lookahead or (s.state == "finishing" and new > 0)

    def gather(self, streams: list[DecodeStream]) -> list[tuple[torch.Tensor, int, int, int]]:
        return [self._window(s) for s in streams]

    def _window(self, s: DecodeStream) -> tuple[torch.Tensor, int, int, int]:
        """(window tokens [K, n], offset of the first output frame in it, frames to output,
        the stream frame the window starts at)."""
        if s.held:
            s.history = torch.cat([s.history, s.take(s.held)], 1)
        w = self.window
        avail = s.history_start + s.history.shape[1]
        emit = min(w.chunk, avail - s.emitted)
        start = window_start(s.emitted, w.left, self.codec.window_align)
        stop = min(avail, s.emitted + emit + w.lookahead)
        tokens = s.history[:, start - s.history_start : stop - s.history_start]
        offset = s.emitted - start
        s.emitted += emit
        keep_from = window_start(s.emitted, w.left, self.codec.window_align)  # the next's
        s.history = s.history[:, keep_from - s.history_start:]
        s.history_start = keep_from
        return tokens, offset, emit, start

    def run(self, streams: list[DecodeStream], work: list[tuple]) -> list[np.ndarray]:
        codec = self.codec
        lengths = [t.shape[1] for t, *_ in work]
        tokens = torch.zeros(len(work), codec.num_codebooks, max(lengths), dtype=torch.long)
        for i, (t, *_) in enumerate(work):
            tokens[i, :, : t.shape[1]] = t
        codes = Codes(tokens, torch.tensor(lengths), codec=codec.name,
                      sample_rate=codec.sample_rate, samples_per_frame=codec.samples_per_frame)
        # each window's place in its stream: a codec's output may depend on it (seeded noise)
        audio = codec.decode(codes, frame_offsets=[start for *_, start in work]).numpy()
        spf = codec.samples_per_frame
        # a window's audio ends where its decode does (short of whole frames for some codecs)
        ends = codec.audio_lengths(torch.tensor(lengths)).tolist()
        return [audio[i, 0, offset * spf : min((offset + emit) * spf, ends[i])]
                for i, (_, offset, emit, _) in enumerate(work)]


class _Stateful:
    """Streams of a codec's own stateful stream (`inner`: Codec.decoder_stream or
    encoder_stream): every frame run once; streams whose states have the same shapes (their
    key) and push as many frames run as one batch. A finishing stream's last step runs the
    stream's end (each layer's right padding) on its own."""

    mode = "stateful"
    # frames (rows x frames per row) one batched call takes at most: past that the activations
    # outgrow the caches (full-size SNAC 24 kHz on 2 CPU cores: 7.9 ms a frame at 4 rows x 8
    # frames, 17 ms at 8 x 8; 1-frame pushes batch up to 32 rows)
    BATCH_FRAMES = 32

    def __init__(self, codec, max_frames: int):
        self.codec = codec
        self.max_frames = max_frames

    def warm_shapes(self, rows: int) -> list[tuple[int, int]]:
        return warm_grid(rows, self.max_frames)

    def warm(self, slots: list, frames: int) -> None:
        """Streams of silence on `len(slots)` rows (slots: None each, this runner has no batch
        slots), past their start (Engine.start_warmup)."""
        inners = [self._make() for _ in slots]
        x = self._silence(len(slots), frames).to(self.codec.device)
        with torch.inference_mode():
            for _ in range(4 if self.kind == "decode" else 8):
                inners = [inner for inner, _ in type(inners[0]).push_together(inners, x)]

    def _run(self, streams: list, work: list, end) -> list:
        """Each stream's inner stream advanced by its work (a batch-first tensor [1, ..., t]
        of t frames; `end(inner, w)` for a finishing stream's last step), on new inner streams,
        which replace the streams' only once all have run (the engine retries a failed batch
        stream by stream). Returns each stream's output, row 0."""
        inners = [s.inner or self._make() for s in streams]
        new, out = list(inners), [None] * len(streams)
        groups: dict[tuple, list[int]] = {}
        for i, w in enumerate(work):
            key = ("end",) if self._ends(streams[i], w) else (w.shape[-1], *inners[i].key())
            groups.setdefault(key, []).append(i)
        with torch.inference_mode():
            for key, rows in groups.items():
                if key == ("end",):
                    for i in rows:
                        new[i] = inners[i].copy()
                        out[i] = end(new[i], work[i])[0]
                    continue
                per_call = max(1, self.BATCH_FRAMES // self._frames(key[0]))
                for a in range(0, len(rows), per_call):
                    part = rows[a : a + per_call]
                    x = torch.cat([work[i] for i in part]).to(self.codec.device)
                    done = type(inners[part[0]]).push_together([inners[i] for i in part], x)
                    for i, (inner, y) in zip(part, done, strict=True):
                        new[i], out[i] = inner, y[0]
        for s, w, inner in zip(streams, work, new, strict=True):
            s.inner, s.ended = inner, s.ended or self._ends(s, w)
        return out


class StatefulDecode(_Stateful):
    """Decode streams of a codec with its own stateful decoder stream (Codec.decoder_stream):
    the audio out as soon as it is final."""

    kind = "decode"

    def _make(self):
        return self.codec.decoder_stream()

    def _silence(self, rows: int, frames: int) -> torch.Tensor:
        return torch.zeros(rows, self.codec.num_codebooks, frames, dtype=torch.long)

    def _frames(self, width: int) -> int:
        return width

    @staticmethod
    def _ends(s: DecodeStream, w) -> bool:
        return w is None

    def ready(self, s: DecodeStream) -> bool:
        return s.held > 0 or (s.state == "finishing" and not s.ended)

    def gather(self, streams: list[DecodeStream]) -> list[torch.Tensor | None]:
        """The frames each stream runs (None: its end): the lower median of their waiting
        frames (at most max_frames), or fewer if a stream has fewer; streams that run as many
        frames, with matching states, form one batch (run), so that a step is one or two calls
        rather than one per push size."""
        n = step_frames([s.held for s in streams], self.max_frames)
        return [s.take(min(s.held, n))[None] if s.held else None for s in streams]

    def run(self, streams: list[DecodeStream], work: list) -> list[np.ndarray]:
        out = self._run(streams, work, lambda inner, _: inner.finish())
        return [self._first_chunk(s, a[0].cpu().numpy()) for s, a in zip(streams, out,
                                                                         strict=True)]

    def _first_chunk(self, s: DecodeStream, audio: np.ndarray) -> np.ndarray:
        """A stream's first audio waits until a frame's worth is final (samples_per_frame), so
        that a player starting at the first audio has that much in hand while the next frame's
        codes come (its first samples alone would be a few ms ahead of the next ones)."""
        if s.samples_out:
            return audio
        held = audio if s.first_audio is None else np.concatenate([s.first_audio, audio], -1)
        if held.shape[-1] < self.codec.samples_per_frame and not s.ended:
            s.first_audio = held
            return audio[:0]
        s.first_audio = None
        return held


class StatefulEncode(_Stateful):
    """Encode streams of a codec with its own stateful encoder stream (Codec.encoder_stream):
    each frame's tokens once its samples are in; the last partial frame at the stream's end,
    padded as the offline encode pads it."""

    kind = "encode"

    def _make(self):
        return self.codec.encoder_stream()

    def _silence(self, rows: int, frames: int) -> torch.Tensor:
        return torch.zeros(rows, 1, frames * self.codec.samples_per_frame)

    def _frames(self, width: int) -> int:
        return max(1, width // self.codec.samples_per_frame)

    @staticmethod
    def _ends(s: EncodeStream, w) -> bool:
        return s.last_step

    def ready(self, s: EncodeStream) -> bool:
        return s.frames_ready() > 0 or (s.state == "finishing" and not s.ended)

    def gather(self, streams: list[EncodeStream]) -> list[torch.Tensor | None]:
        """Whole frames (as StatefulDecode's gather); a finishing stream's last step (marked
        `last_step`) takes the rest of its samples (None: none) and ends the stream."""
        n = step_frames([max(1, s.frames_ready()) for s in streams], self.max_frames)
        work = []
        for s in streams:
            x = s.take(min(s.frames_ready(), n)) if s.frames_ready() else None
            if s.state == "finishing" and s.frames_ready() == 0:
                s.last_step = True
                rest = s.take_rest()
                x = rest if x is None else np.concatenate([x, rest])
            work.append(None if x is None or x.size == 0 else torch.from_numpy(x)[None, None])
        return work

    def run(self, streams: list[EncodeStream], work: list) -> list[np.ndarray]:
        def end(inner, w):
            head = inner.push(w) if w is not None else None
            rest = inner.finish()
            return rest if head is None else torch.cat([head, rest], -1)

        return [t.cpu().numpy() for t in self._run(streams, work, end)]


class _Scaled:
    """Streams of a codec whose codes carry segment scales (Codec.codes_carry_scales), through
    its own segment streams: a segment is encoded or decoded whole once its input is in (a
    second of audio), so each stream runs alone (two streams rarely complete a segment in one
    step). Each step advances a copy of a stream's inner stream, kept once every stream of the
    step has run (the engine retries a failed step stream by stream)."""

    mode = "segments"

    def warm_shapes(self, rows: int) -> list[tuple[int, int]]:
        return [(1, 1)]

    def warm(self, slots: list, frames: int) -> None:
        """One whole segment of silence (Engine.start_warmup)."""
        self._run_all([self._warm_work()], [None])

    def _run_all(self, work: list, inners: list) -> tuple[list, list[np.ndarray]]:
        new, out = [], []
        with torch.inference_mode():
            for w, inner in zip(work, inners, strict=True):
                inner = self._make() if inner is None else inner.copy()
                new.append(inner)
                out.append(self._advance(inner, *w).cpu().numpy()[0])
        return new, out

    def run(self, streams: list, work: list) -> list[np.ndarray]:
        new, out = self._run_all(work, [s.inner for s in streams])
        for s, inner, w in zip(streams, new, work, strict=True):
            s.inner, s.ended = inner, s.ended or w[-1]
        return out


class ScaledDecode(_Scaled, StatefulDecode):
    """Decode streams, tokens and scales pushed in any order (DecodeStream.push)."""

    def ready(self, s: DecodeStream) -> bool:
        return s.held > 0 or bool(s.scales_pending) or (s.state == "finishing" and not s.ended)

    def gather(self, streams: list[DecodeStream]) -> list[tuple]:
        """(tokens [K, t], scales [j] or None, whether the stream ends) of each stream."""
        work = []
        for s in streams:
            tokens = s.take(s.held) if s.held else self._silence(1, 0)[0]
            scales = np.concatenate(s.scales_pending) if s.scales_pending else None
            s.scales_pending.clear()
            work.append((tokens, scales, s.state == "finishing"))
        return work

    def _warm_work(self) -> tuple:
        frames = self.codec.num_frames(self.codec.sample_rate)  # a second: a whole segment
        return self._silence(1, frames + 1)[0], np.ones(2, np.float32), True

    def _advance(self, inner, tokens, scales, end) -> torch.Tensor:
        y = inner.push(tokens[None].to(self.codec.device),
                       None if scales is None else torch.from_numpy(scales)[None])
        return (torch.cat([y, inner.finish()], -1) if end else y).float()

    def run(self, streams: list[DecodeStream], work: list) -> list[np.ndarray]:
        out = _Scaled.run(self, streams, work)
        return [self._first_chunk(s, a) for s, a in zip(streams, out, strict=True)]


class ScaledEncode(_Scaled, StatefulEncode):
    """Encode streams: every whole frame's samples pushed as they come; a segment's tokens
    and scale once its samples are in (EncodeStream.scales)."""

    def gather(self, streams: list[EncodeStream]) -> list[tuple]:
        """(audio [C, n] or None, whether the stream ends) of each stream."""
        work = []
        for s in streams:
            x = s.take(s.frames_ready()) if s.frames_ready() else None
            end = s.state == "finishing"
            if end:
                rest = s.take_rest()
                x = rest if x is None else np.concatenate([x, rest], -1)
            work.append((x, end))
        return work

    def _warm_work(self) -> tuple:
        return np.zeros((self.codec.channels, self.codec.input_rate), np.float32), True

    def _advance(self, inner, audio, end) -> torch.Tensor:
        y = None
        if audio is not None and audio.shape[-1]:
            x = torch.from_numpy(audio).reshape(1, self.codec.channels, -1)
            y = inner.push(x.to(self.codec.device, self.codec.stream_input_dtype))
        if end:
            rest = inner.finish()
            y = rest if y is None else torch.cat([y, rest], -1)
        return torch.zeros(1, self.codec.num_codebooks, 0, dtype=torch.long) if y is None else y


class ScaledTokens(NamedTuple):
    """An encode's tokens [K, T] and its segments' scales [S], for codes that carry them."""

    tokens: np.ndarray
    scales: np.ndarray


def run_offline(codec, kind: str, payloads: list) -> list:
    """One padded batch of whole requests (per-item results equal one-at-a-time calls).
    encode: audio float32 [n] ([C, n]) at the codec's input rate -> tokens int64 [K, T] (codes
    that carry scales: ScaledTokens); decode: (tokens [K, T], num_samples or None, scales [S]
    or None) -> audio float32 [N] ([C, N] for C > 1 channels)."""
    if kind == "encode":
        codes = codec.encode([torch.from_numpy(a) for a in payloads], codec.input_rate)
        tokens = codes.tokens.numpy()
        out = [tokens[i, :, :n] for i, n in enumerate(codes.lengths.tolist())]
        if codes.scales is None:
            return out
        return [ScaledTokens(t, codes.scales[i, : codec.segment_count(t.shape[1])].numpy())
                for i, t in enumerate(out)]
    lengths = [t.shape[1] for t, _, _ in payloads]
    tokens = torch.zeros(len(payloads), codec.num_codebooks, max(lengths), dtype=torch.long)
    for i, (t, _, _) in enumerate(payloads):
        tokens[i, :, : t.shape[1]] = t
    scales = None
    if any(sc is not None for _, _, sc in payloads):  # those without: ones (unscaled)
        scales = torch.ones(len(payloads), max(codec.segment_count(n) for n in lengths))
        for i, (_, _, sc) in enumerate(payloads):
            if sc is not None:
                scales[i, : sc.shape[0]] = torch.from_numpy(sc)
    spf = codec.samples_per_frame
    num_samples = torch.tensor([n * spf if ns is None else ns
                                for n, (_, ns, _) in zip(lengths, payloads, strict=True)])
    audio = codec.decode(Codes(tokens, torch.tensor(lengths), codec=codec.name,
                               sample_rate=codec.sample_rate, samples_per_frame=spf,
                               num_samples=num_samples, scales=scales)).numpy()
    n_out = codec.audio_lengths(torch.tensor(lengths), num_samples).tolist()
    if codec.channels > 1:
        return [audio[i, :, :n] for i, n in enumerate(n_out)]
    return [audio[i, 0, :n] for i, n in enumerate(n_out)]
