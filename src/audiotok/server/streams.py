"""The streams an Engine serves, as their users see them: push input, read output.

    with engine.open_decode_stream("tts") as s:   # a slot is leased for the stream
        s.push(tokens)                             # integer [K, t], any t >= 1, as they come
        pcm = s.read()                             # float32 [samples] ([C, samples] for a
                                                   # codec of C > 1 channels), in order
        ready = s.available()                      # what is there now, without waiting
        ...
        s.finish()                                 # end of input: what is held back follows
        for pcm in s: ...                          # the rest, until the end

`read`, iteration and `aread` / `async for` (asyncio) all take from one ordered outbox. A bad
push raises at once and leaves the stream as it was; a stream that fails in the engine raises
its error from `read`. A stream closes when its output is read to the end, or with `abort()`
(a client that went away), which frees its slot at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

import numpy as np
import torch

from ..codec import _as_token_tensor
from ..errors import AudioError, CodesError
from ..tokencheck import within_codebooks
from .errors import EngineBusy, EngineError, StreamClosed

__all__ = ["DecodeStream", "EncodeStream", "EngineBusy", "EngineError", "Stream",
           "StreamClosed"]


_END = object()


class Outbox:
    """An ordered queue of outputs that threads and asyncio tasks can wait on."""

    def __init__(self):
        self.items: deque = deque()
        self.cond = threading.Condition()
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self.queued_samples = 0

    def put(self, item) -> None:
        with self.cond:
            self.items.append(item)
            if isinstance(item, np.ndarray):
                self.queued_samples += item.shape[-1]
            self.cond.notify_all()
            waiters, self.waiters = self.waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_wake, fut)

    def _pop(self):
        item = self.items[0]
        if item is _END or isinstance(item, BaseException):
            return item  # stays: every later read sees the end too
        self.items.popleft()
        if isinstance(item, np.ndarray):
            self.queued_samples -= item.shape[-1]
        return item

    def get(self, timeout: float | None = None):
        with self.cond:
            if not self.cond.wait_for(lambda: self.items, timeout):
                raise TimeoutError("no output within the timeout")
            return self._pop()

    def take_ready(self) -> list:
        """Every output already there, without waiting (up to an end or error, which stay)."""
        with self.cond:
            out = []
            while self.items and isinstance(self.items[0], np.ndarray):
                out.append(self._pop())
            return out

    async def aget(self):
        loop = asyncio.get_running_loop()
        while True:
            with self.cond:
                if self.items:
                    return self._pop()
                fut = loop.create_future()
                self.waiters.append((loop, fut))
            await fut


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class Stream:
    """What every stream kind shares; see the module docstring. Created by the Engine, which
    keeps the stream's state in its runner (server/runner.py) and reads its input from here."""

    kind = ""
    unit = "frame"

    def __init__(self, engine, model: str, codec, stream_id: int, *, clamp: bool = False):
        self.engine = engine
        self.model = model
        self.codec = codec
        self.clamp = clamp
        self.id = stream_id
        self.outbox = Outbox()
        self.state = "open"  # open -> finishing -> done | failed | aborted
        self.error: BaseException | None = None
        self.opened = time.monotonic()
        self.first_push: float | None = None
        self.first_output: float | None = None
        self.frames_in = 0
        self.samples_in = 0  # encode streams: samples pushed (at the codec's rate)
        self.frames_out = 0
        self.samples_out = 0
        self.held = 0  # input units (frames or samples) waiting for the engine
        self.waiting_since = 0.0  # when the oldest waiting input came
        self.pending: deque = deque()  # input chunks not yet run
        self.conditioning: dict = {}  # what a decode stream decodes with (its voice)

    # -- the user's side -----------------------------------------------------------------------
    def finish(self) -> None:
        """End of input; the output ends after what is still held back."""
        self.engine.finish(self)

    def abort(self) -> None:
        """Drop everything and free its row now (the reader sees the stream end)."""
        self.engine.abort(self)

    def read(self, timeout: float | None = None) -> np.ndarray | None:
        """The next output, in order; None once the stream has ended. Raises the stream's error
        if it failed, TimeoutError after `timeout` seconds without output."""
        return self._unwrap(self.outbox.get(timeout))

    def available(self) -> list[np.ndarray]:
        """The outputs decoded so far and not yet read, without waiting ([] if none)."""
        return self.outbox.take_ready()

    async def aread(self) -> np.ndarray | None:
        return self._unwrap(await self.outbox.aget())

    def _unwrap(self, item):
        if item is _END:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def __iter__(self):
        while (item := self.read()) is not None:
            yield item

    def __aiter__(self):
        return self._aiter()

    async def _aiter(self):
        while (item := await self.aread()) is not None:
            yield item

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None and self.state == "open":
            self.finish()
        elif exc_type is not None:
            self.abort()

    def summary(self) -> dict:
        return {"id": self.id, "model": self.model, "kind": self.kind,
                "state": self.state, "frames_in": self.frames_in,
                "frames_out": self.frames_out, "samples_out": self.samples_out,
                "error": None if self.error is None else str(self.error)}

    # -- the engine's side (called under the engine's lock) ------------------------------------
    @property
    def active(self) -> bool:
        return self.state in ("open", "finishing")

    def deadline(self) -> float:
        """When a real-time player of this stream's output would run dry (new streams: when
        their first input came, so they go first)."""
        if self.first_output is None:
            return float("-inf") if self.first_push is None else self.first_push - 1e9
        return self.first_output + self.samples_out / self.codec.sample_rate


def check_token_chunk(tokens, codec, clamp: bool) -> torch.Tensor:
    """Tokens [K, t] (or [1, K, t]) as int64, in range (or clamped); t may be 0."""
    t = _as_token_tensor(tokens, "an integer array")
    if t.ndim == 3 and t.shape[0] == 1:
        t = t[0]
    k = codec.num_codebooks
    if t.ndim != 2 or t.shape[0] != k:
        raise CodesError(f"pushed tokens must be [{k}, t] (codebooks x frames), got shape "
                         f"{tuple(t.shape)}")
    t = t.detach().to("cpu", torch.long).numpy()
    t = within_codebooks(t, codec.codebook_sizes, clamp, "codebook {0}, frame {1} of this push",
                         "open the stream with clamp=True to clamp")
    return torch.from_numpy(t.copy())


def check_audio_chunk(audio, channels: int = 1) -> np.ndarray:
    """Float audio as float32, finite: mono [n] (or [1, n]) for a mono codec; for a codec of
    C > 1 channels, [C, n] (mono [n] goes on every channel, as the library's encode does)."""
    try:
        x = audio.detach().cpu().numpy() if isinstance(audio, torch.Tensor) else np.asarray(audio)
    except (TypeError, ValueError):
        raise AudioError(f"pushed audio must be a float array, got "
                         f"{type(audio).__name__}") from None
    if channels > 1:
        if x.ndim == 1:
            x = np.broadcast_to(x, (channels, x.shape[0]))
        if x.ndim != 2 or x.shape[0] != channels:
            raise AudioError(f"pushed audio must be [{channels}, n] (or mono [n]) at the "
                             f"codec's rate, got shape {x.shape}")
    elif x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if channels == 1 and x.ndim != 1:
        raise AudioError(f"pushed audio must be mono [n] at the codec's rate, got shape "
                         f"{x.shape}")
    if x.dtype.kind != "f":
        raise AudioError(f"pushed audio must be float, got dtype {x.dtype}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        raise AudioError("pushed audio contains NaN or Inf")
    return x.copy()


def check_scales(scales, codec, frames: int | None = None) -> np.ndarray:
    """Segment scales [S] as float32, finite and positive, for a codec whose codes carry them
    (StreamSpec.scales); with `frames`, exactly the segments of that many frames."""
    if not codec.streaming.scales:
        raise CodesError(f"{codec.title} codes carry no segment scales")
    try:
        x = np.asarray(scales.detach().cpu() if isinstance(scales, torch.Tensor) else scales)
    except (TypeError, ValueError):
        raise CodesError("scales must be a list of numbers") from None
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 1 or x.dtype.kind not in "iuf" or not np.isfinite(x).all() or (x <= 0).any():
        raise CodesError(f"scales must be positive finite numbers [segments], got "
                         f"{x.dtype} {x.shape}")
    if frames is not None and x.shape[0] != (want := codec.segment_count(frames)):
        raise CodesError(f"{frames} frames are {want} segments; got {x.shape[0]} scales")
    return np.ascontiguousarray(x, dtype=np.float32)


class DecodeStream(Stream):
    """Tokens in, audio out, as the codec's streams run them (exactly, where the codec streams
    exactly; else in windows, see WindowSettings). For a codec whose codes carry segment
    scales, push(tokens, scales) also takes the scales of the next segments (in any pieces,
    before or after their tokens); a segment's audio waits for its scale."""

    kind = "decode"

    def __init__(self, engine, model: str, codec, stream_id: int, *, clamp: bool = False):
        super().__init__(engine, model, codec, stream_id, clamp=clamp)
        self.scales_pending: list[np.ndarray] = []  # segment scales not yet run

    def push(self, tokens, scales=None) -> None:
        """Queue tokens [K, t] (t may be 0) for decoding, and the scales [j] of the next j
        segments for codes that carry them; raises CodesError (bad tokens), EngineBusy
        (backlog full) or StreamClosed, leaving the stream as it was."""
        t = check_token_chunk(tokens, self.codec, self.clamp)
        sc = None if scales is None else check_scales(scales, self.codec)
        self.engine.submit(self, t, t.shape[1], sc)

    def take(self, n: int) -> torch.Tensor:
        """Pop the next n frames [K, n] (engine lock held)."""
        out, got = [], 0
        while got < n:
            head = self.pending[0]
            need = n - got
            if head.shape[1] <= need:
                out.append(self.pending.popleft())
            else:
                out.append(head[:, :need])
                self.pending[0] = head[:, need:]
            got += out[-1].shape[1]
        self.held -= n
        return torch.cat(out, 1) if len(out) > 1 else out[0]


class EncodeStream(Stream):
    """Audio (at the codec's rate; [C, n] for a codec of C > 1 channels) in, tokens out as each
    frame's samples are complete; `finish()` encodes the last partial frame as offline encode
    completes it. Tokens equal offline encode. For codes that carry segment scales, `scales()`
    gives every segment's scale so far; a segment's scale is there before its tokens are
    read."""

    kind = "encode"
    unit = "sample"
    final_scales: np.ndarray | None = None  # the segments' scales once the stream's row is gone

    def push(self, audio) -> None:
        """Queue float audio [n] ([C, n] for C > 1 channels) at the codec's input rate."""
        x = check_audio_chunk(audio, self.codec.channels)
        self.engine.submit(self, x, x.shape[-1])

    def scales(self) -> np.ndarray:
        """The scales [S] of the segments encoded so far (codes that carry them)."""
        if not self.codec.streaming.scales:
            raise AttributeError(f"{self.codec.title} codes carry no segment scales")
        return self.engine.stream_scales(self)

    def take_samples(self, n: int) -> np.ndarray:
        """Pop the next n samples ([C, n] for C > 1 channels; engine lock held)."""
        out, got = [], 0
        while got < n:
            head = self.pending[0]
            if head.shape[-1] <= n - got:
                out.append(self.pending.popleft())
            else:
                out.append(head[..., : n - got])
                self.pending[0] = head[..., n - got:]
            got += out[-1].shape[-1]
        self.held -= n
        if not out:
            channels = self.codec.channels
            return np.zeros((channels, 0) if channels > 1 else 0, np.float32)
        return np.concatenate(out, -1) if len(out) > 1 else out[0]
