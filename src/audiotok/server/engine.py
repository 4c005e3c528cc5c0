"""The serving engine: loaded codecs, one worker thread that runs every model call, many
concurrent streams batched step by step, and offline requests batched in short windows.

    engine = Engine({"tts": audiotok.load(name)}, EngineSettings(max_streams=64))
    with engine.open_decode_stream("tts") as s:      # streams.py: push, read, finish
        s.push(tokens); pcm = s.read()
    tokens = engine.encode("tts", audio).result()    # offline: concurrent.futures.Future
    tokens = await engine.aencode("tts", audio)      # the same from asyncio
    engine.close()                                    # drain, then stop the worker

Each step runs, for every model and stream kind, one batch of the streams that have work: new
streams first (first audio), then those whose real-time playback would run dry soonest; at most
`max_batch` streams, each with the lower median of their waiting frames (at most
`max_step_frames`; see batches.py). A batch waits up to
`step_wait_ms` for the frames of other open streams (streams push at their own moments; without
the wait, each step would run one or two of them), unless a new stream waits for its first
audio or every open stream has frames waiting. Between stream steps, at most
one batch of offline requests per model runs once its collection window (`batch_wait_ms`) has
passed, so neither starves the other. Admission is bounded everywhere: open streams
(`max_streams`), queued offline requests, and each stream's input and unread output
(`max_backlog_seconds`); beyond a bound the caller gets EngineBusy at once. A codec loaded with
CUDA graphs has its stream steps replayed as graphs too (slots.GraphedSteps). No web code here.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from ..codec import Codec
from ..errors import AudioError, AudiotokError
from .batches import (
    CausalDecode,
    CausalEncode,
    ScaledDecode,
    ScaledEncode,
    StatefulDecode,
    StatefulEncode,
    WindowedDecode,
    run_offline,
)
from .settings import EngineSettings, WindowSettings
from .streams import (
    _END,
    DecodeStream,
    EncodeStream,
    EngineBusy,
    EngineError,
    Stream,
    StreamClosed,
    check_audio_chunk,
    check_scales,
    check_token_chunk,
)
from .warmup import Warmup

log = logging.getLogger("audiotok.server")


class Histogram:
    """Cumulative counts of observations at or below each bound (Prometheus style)."""

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.counts[i] += 1


LATENCY_BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)
BATCH_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class EngineStats:
    """Counters since the engine started (the server exports them as metrics)."""

    steps: Counter = field(default_factory=Counter)  # (model, kind) -> steps
    step_seconds: Counter = field(default_factory=Counter)  # (model, kind) -> seconds
    batch_sizes: Counter = field(default_factory=Counter)  # streams or requests per batch
    batch_hist: Histogram = field(default_factory=lambda: Histogram(BATCH_BOUNDS))
    step_hist: Histogram = field(default_factory=lambda: Histogram(LATENCY_BOUNDS))
    first_audio: Histogram = field(default_factory=lambda: Histogram(LATENCY_BOUNDS))
    audio_seconds: Counter = field(default_factory=Counter)  # model -> seconds produced
    errors: Counter = field(default_factory=Counter)  # kind -> count

    def step(self, model: str, kind: str, size: int, seconds: float) -> None:
        self.steps[model, kind] += 1
        self.step_seconds[model, kind] += seconds
        self.batch_sizes[size] += 1
        self.batch_hist.observe(size)
        self.step_hist.observe(seconds)


@dataclass
class _Request:
    kind: str  # "encode" | "decode"
    payload: object
    seconds: float  # audio it stands for
    future: Future
    arrived: float


class Served:
    """One loaded model and everything the engine keeps for it."""

    def __init__(self, name: str, codec: Codec, settings: EngineSettings):
        self.name = name
        self.codec = codec
        self.streams: list[Stream] = []
        self.requests: deque[_Request] = deque()
        if codec.causal:
            self.runners = {
                "decode": CausalDecode(codec, settings.max_streams, settings.max_step_frames)}
            if codec.encoder_streams:
                self.runners["encode"] = CausalEncode(codec, settings.max_streams,
                                                      settings.max_step_frames)
            if codec.graphs is not None:  # loaded with CUDA graphs: the steps replay them too
                for runner in self.runners.values():
                    runner.use_graphs()
        elif codec.codes_carry_scales:  # segment by segment, each with its scale
            self.runners = {"decode": ScaledDecode(codec, settings.max_step_frames)}
        elif codec.stream_stateful and settings.window is None:
            self.runners = {"decode": StatefulDecode(codec, settings.max_step_frames)}
        else:
            window = settings.window or WindowSettings(*codec.stream_window)
            self.runners = {"decode": WindowedDecode(codec, window)}
        if codec.encode_stateful:
            self.runners["encode"] = (ScaledEncode if codec.codes_carry_scales else
                                      StatefulEncode)(codec, settings.max_step_frames)


class Engine:
    """See the module docstring. `start=False` leaves the worker off: the caller drives it with
    `step()` (tests use this for exact schedules)."""

    def __init__(self, models: dict[str, Codec], settings: EngineSettings | None = None, *,
                 start: bool = True):
        if not models:
            raise ValueError("an engine needs at least one model")
        self.settings = settings or EngineSettings()
        self.models = {name: Served(name, c, self.settings) for name, c in models.items()}
        self.stats = EngineStats()
        self.cond = threading.Condition()
        self.accepting = True
        self.stopping = False
        self._ids = itertools.count(1)
        self.worker: threading.Thread | None = None
        self._due_at: float | None = None  # when a deferred batch is due (worker's wait)
        self.warming = Warmup()  # start_warmup() plans it; the worker runs it between steps
        self._on_warm = None
        self._warm_held: dict[tuple[str, str], int] = {}  # slots a warm-up step holds
        if start:
            self.worker = threading.Thread(target=self._loop, name="audiotok-engine",
                                           daemon=True)
            self.worker.start()

    # -- streams -------------------------------------------------------------------------------
    def open_decode_stream(self, model: str, *, clamp: bool = False) -> DecodeStream:
        """A new decode stream (tokens in, audio out); EngineBusy when `max_streams` are open."""
        return self._open(DecodeStream, model, clamp)

    def open_encode_stream(self, model: str) -> EncodeStream:
        """A new encode stream (audio in, tokens out); causal codecs and those with a stateful
        encoder stream only."""
        served = self._served(model)
        if "encode" not in served.runners:
            why = "its settings keep no bounded encoder state" if served.codec.causal else \
                "it is not causal"
            raise EngineError(f"model {model!r} ({served.codec.title}) cannot encode a stream "
                              f"({why}); send the whole audio to encode")
        return self._open(EncodeStream, model, False)

    def _open(self, cls, model: str, clamp: bool) -> Stream:
        served = self._served(model)
        with self.cond:
            self._check_accepting()
            s = cls(self, served, clamp=clamp)
            runner = served.runners[s.kind]
            if len(served.streams) >= self.settings.max_streams:
                raise EngineBusy(f"model {model!r} has {len(served.streams)} open streams "
                                 f"(max_streams {self.settings.max_streams}); try again later")
            if hasattr(runner, "table"):
                s.slot = runner.table.acquire()
                # a warm-up step holding slots gives them back after that step (_warm_one); the
                # slots of aborted streams not yet reset come back at the next step
                if s.slot is None and not self._warm_held.get((model, s.kind)):
                    raise EngineBusy(f"model {model!r}: no free {s.kind} slot; try again later")
            served.streams.append(s)
        return s

    def _push(self, s: Stream, chunk, units: int, scales: np.ndarray | None = None) -> None:
        with self.cond:
            s._accept(units)
            if scales is not None and scales.size:
                s.scales_pending.append(scales)
                self.cond.notify_all()
            if units == 0:
                return
            if s.held == 0:
                s.waiting_since = time.monotonic()
            s.pending.append(chunk)
            s.held += units
            if s.unit == "frame":
                s.frames_in += units
            else:
                s.samples_in += units
            self.cond.notify_all()

    def _finish(self, s: Stream) -> None:
        with self.cond:
            if s.state == "open":
                s.state = "finishing"
                self.cond.notify_all()

    def _abort(self, s: Stream, error: BaseException | None) -> None:
        with self.cond:
            if not s.active:
                return
            s.state = "aborted" if error is None else "failed"
            s.error = error
            s.pending.clear()
            s.held = 0
            if s.kind == "decode":
                s.scales_pending.clear()
            s.outbox.put(_END if error is None else error)
            if error is not None:
                self.stats.errors[type(error).__name__] += 1
            self.cond.notify_all()  # the worker frees the slot (it may be mid-step on it)

    # -- offline requests ----------------------------------------------------------------------
    def encode(self, model: str, audio) -> Future:
        """Future of tokens int64 [K, T] for float audio [n] (a codec of C > 1 channels: [C, n]
        or mono [n]) at the codec's input rate; for codes that carry segment scales, of
        ScaledTokens(tokens, scales [S])."""
        served = self._served(model)
        x = check_audio_chunk(audio, served.codec.channels)
        if x.size == 0:
            raise AudioError("empty audio")
        seconds = x.shape[-1] / served.codec.input_rate
        return self._submit(served, "encode", x, seconds)

    def decode(self, model: str, tokens, *, num_samples: int | None = None,
               clamp: bool = False, scales=None) -> Future:
        """Future of audio float32 [N] ([C, N] for C > 1 channels) for tokens [K, T] (N =
        num_samples when given, at most T * samples_per_frame); `scales` [S]: the segments'
        scales, for codes that carry them (without: each segment as decoded, unscaled)."""
        served = self._served(model)
        t = check_token_chunk(tokens, served.codec, clamp)
        if t.shape[1] == 0:
            raise AudiotokError("no frames to decode")
        if num_samples is not None and not 0 < num_samples <= t.shape[1] * \
                served.codec.samples_per_frame:
            raise AudiotokError(f"num_samples {num_samples} does not fit {t.shape[1]} frames")
        if scales is not None:
            scales = check_scales(scales, served.codec, t.shape[1])
        return self._submit(served, "decode", (t, num_samples, scales), t.shape[1] /
                            served.codec.frame_rate)

    async def aencode(self, model: str, audio) -> np.ndarray:
        return await asyncio.wrap_future(self.encode(model, audio))

    async def adecode(self, model: str, tokens, **kw) -> np.ndarray:
        return await asyncio.wrap_future(self.decode(model, tokens, **kw))

    def _submit(self, served: Served, kind: str, payload, seconds: float) -> Future:
        s = self.settings
        if seconds > s.max_request_seconds:
            raise AudiotokError(f"{seconds:.1f} s of audio is over the limit of "
                                f"{s.max_request_seconds:g} s per request")
        with self.cond:
            self._check_accepting()
            if len(served.requests) >= s.max_queued_requests:
                raise EngineBusy(f"model {served.name!r} has {len(served.requests)} requests "
                                 f"queued (max {s.max_queued_requests}); try again later")
            fut: Future = Future()
            served.requests.append(_Request(kind, payload, seconds, fut, time.monotonic()))
            self.cond.notify_all()
        return fut

    # -- state ---------------------------------------------------------------------------------
    def _served(self, model: str) -> Served:
        served = self.models.get(model)
        if served is None:
            raise EngineError(f"unknown model {model!r}; loaded: {', '.join(self.models)}")
        return served

    def _check_accepting(self) -> None:
        if not self.accepting:
            raise StreamClosed("the engine is shutting down and takes no new work")

    def _next_id(self) -> int:
        return next(self._ids)

    def load(self) -> dict:
        """Open streams and queued requests per model."""
        with self.cond:
            return {name: {"streams": len(m.streams), "queued_requests": len(m.requests),
                           "queued_frames": sum(s.held for s in m.streams if s.unit == "frame")}
                    for name, m in self.models.items()}

    def start_warmup(self, on_model_done=None) -> None:
        """Queue the warm-up (warmup.py): every model's step shapes, run by the worker between
        real work, first phase first. `on_model_done(model, ModelWarmup)` is called (on the
        worker) as each model finishes. Streams and requests are served meanwhile."""
        shapes = {}
        rows = self.settings.max_batch
        for name, served in self.models.items():
            for kind, runner in served.runners.items():
                capacity = runner.table.capacity if hasattr(runner, "table") else rows
                shapes[name, kind] = runner.warm_shapes(min(rows, capacity))
        with self.cond:
            self._on_warm = on_model_done
            self.warming.plan(shapes)
            self.cond.notify_all()

    def warmup(self) -> float:
        """Warm every step shape now (start_warmup, then wait for the whole plan; without a
        worker, run it here). Returns seconds."""
        start = time.perf_counter()
        self.start_warmup()
        if self.worker is None:
            while self._warm_one():
                pass
        else:
            with self.cond:
                self.cond.wait_for(lambda: self.warming.complete() or self.stopping)
        return time.perf_counter() - start

    def ready(self) -> bool:
        """Whether every model is warmed up (True when no warm-up was started)."""
        with self.cond:
            return self.warming.complete()

    def warmup_status(self) -> dict:
        """Per model: shapes, done, complete, compute seconds, and when (seconds after the
        start) the first phase and the whole warm-up were done."""
        with self.cond:
            return self.warming.status()

    def _warm_one(self) -> bool:
        """Run the next warm-up shape (worker thread); False when none is left. Its slots are
        leased like a stream's; if fewer are free (real streams hold them), fewer run."""
        with self.cond:
            task = self.warming.next()
            if task is None:
                return False
            runner = self.models[task.model].runners[task.kind]
            table = getattr(runner, "table", None)
            slots = []
            while table is not None and len(slots) < task.streams and \
                    (slot := table.acquire()) is not None:
                slots.append(slot)
            self._warm_held[task.model, task.kind] = len(slots)
        start = time.perf_counter()
        try:
            if table is None:  # a runner without slots warms as many rows
                runner.warm([None] * task.streams, task.frames)
            elif slots:
                runner.warm(slots, task.frames)
        except Exception:  # noqa: BLE001 - a shape that fails here fails for its stream later
            log.exception("audiotok engine: warming %s %s (%d x %d) failed", task.model,
                          task.kind, task.streams, task.frames)
            with self.cond:
                self.stats.errors["WarmupError"] += 1
        finally:
            with self.cond:
                for slot in slots:
                    table.release(slot)
                self._warm_held[task.model, task.kind] = 0
                for s in self.models[task.model].streams:  # opened while this step held slots
                    if s.kind == task.kind and s.slot is None and s.active:
                        s.slot = table.acquire()
                m = self.warming.record(task, time.perf_counter() - start)
                self.cond.notify_all()
        if m.done == m.total and self._on_warm is not None:  # the model's last shape
            self._on_warm(task.model, m)
        return True

    def table_in_use(self) -> int:
        """Batch slots leased, over every model and stream kind."""
        with self.cond:
            return sum(r.table.in_use for m in self.models.values()
                       for r in m.runners.values() if hasattr(r, "table"))

    # -- the worker ----------------------------------------------------------------------------
    def step(self) -> bool:
        """Run what is ready now, without waiting for collection windows (for callers that
        drive the engine themselves); False when there was nothing."""
        return self._step(windows=False)

    def _step(self, windows: bool) -> bool:
        """One round of work (see the module docstring). With `windows`, a stream batch waits
        up to step_wait_ms for the frames of other open streams (more streams per step, fewer
        steps), unless a new stream waits for its first audio or every open stream is ready;
        offline requests wait batch_wait_ms. Returns whether anything ran."""
        jobs = []
        self._due_at = None
        with self.cond:
            now = time.monotonic()
            for served in self.models.values():
                self._retire(served)
                for kind, runner in served.runners.items():
                    ready = [s for s in served.streams if s.kind == kind and s.active
                             and runner.ready(s) and _has_slot(s, runner)]
                    if not ready or (windows and not self._batch_due(served, kind, ready, now)):
                        continue
                    ready.sort(key=Stream.deadline)
                    batch = ready[: self.settings.max_batch]
                    jobs.append((served, kind, batch, runner.gather(batch)))
                requests = self._due(served, now, windows)
                if requests:
                    jobs.append((served, "offline", requests, None))
        for served, kind, batch, work in jobs:
            if kind == "offline":
                self._run_offline(served, batch)
            else:
                self._run_streams(served, kind, batch, work)
        warmed = self.warming.pending() and self._warm_one()  # one shape between steps
        with self.cond:
            for served in self.models.values():
                self._retire(served)
            self.cond.notify_all()  # close() waits for the streams and requests to be done
        return bool(jobs) or warmed

    def _run_streams(self, served: Served, kind: str, batch: list[Stream], work: list) -> None:
        runner = served.runners[kind]
        start = time.perf_counter()
        try:
            outputs = runner.run(batch, work)
        except Exception:  # noqa: BLE001 - retried one by one: a failure is its stream's own
            outputs = []
            for s, w in zip(batch, work, strict=True):
                try:
                    outputs.append(runner.run([s], [w])[0])
                except Exception as e:  # noqa: BLE001
                    self._abort(s, EngineError(f"stream {s.id} failed: {type(e).__name__}: "
                                               f"{e}"))
                    outputs.append(None)
        elapsed = time.perf_counter() - start
        now = time.monotonic()
        with self.cond:
            st = self.stats
            st.step(served.name, kind, len(batch), elapsed)
            for s, out in zip(batch, outputs, strict=True):
                if out is None or not s.active or out.size == 0:  # (a stateful stream's push
                    continue  # may make no sample final yet: nothing to send)
                if kind == "encode":
                    s.frames_out += out.shape[1]
                else:
                    s.samples_out += out.shape[-1]  # (a stateful stream's chunks: any size)
                    s.frames_out = s.samples_out // served.codec.samples_per_frame
                    st.audio_seconds[served.name] += out.shape[-1] / served.codec.sample_rate
                if s.first_output is None:
                    s.first_output = now
                    if s.first_push is not None:
                        st.first_audio.observe(now - s.first_push)
                s.outbox.put(out)

    def _batch_due(self, served: Served, kind: str, ready: list[Stream], now: float) -> bool:
        """Whether a stream batch should run now rather than wait for more streams' frames
        (else the time it will be due is noted for the worker's wait)."""
        if len(ready) >= self.settings.max_batch or any(s.first_output is None for s in ready):
            return True
        runner = served.runners[kind]
        if all(runner.ready(s) for s in served.streams if s.kind == kind and s.state == "open"):
            return True
        due = min(s.waiting_since for s in ready) + self.settings.step_wait_ms / 1000
        if now >= due:
            return True
        self._due_at = due if self._due_at is None else min(self._due_at, due)
        return False

    def _due(self, served: Served, now: float, windows: bool = True) -> list[_Request]:
        """The next offline batch, if its window has passed: the oldest request and those of
        its kind after it, within the batch limits."""
        q, s = served.requests, self.settings
        if not q:
            return []
        if windows and now - q[0].arrived < s.batch_wait_ms / 1000 and \
                len(q) < s.max_offline_batch:
            due = q[0].arrived + s.batch_wait_ms / 1000
            self._due_at = due if self._due_at is None else min(self._due_at, due)
            return []
        kind, batch, seconds = q[0].kind, [], 0.0
        for r in list(q):
            if r.kind != kind:
                continue
            if batch and (len(batch) >= s.max_offline_batch or
                          seconds + r.seconds > s.max_offline_batch_seconds):
                break
            batch.append(r)
            seconds += r.seconds
        for r in batch:
            q.remove(r)
        return [r for r in batch if r.future.set_running_or_notify_cancel()]

    def _run_offline(self, served: Served, batch: list[_Request]) -> None:
        if not batch:
            return
        kind = batch[0].kind
        start = time.perf_counter()
        try:
            results = run_offline(served.codec, kind, [r.payload for r in batch])
        except Exception:  # noqa: BLE001 - one by one, so an error is charged to its request
            results = []
            for r in batch:
                try:
                    results.append(run_offline(served.codec, kind, [r.payload])[0])
                except Exception as e:  # noqa: BLE001
                    results.append(e)
        with self.cond:
            self.stats.step(served.name, f"offline-{kind}", len(batch),
                            time.perf_counter() - start)
        for r, res in zip(batch, results, strict=True):
            if isinstance(res, Exception):
                with self.cond:
                    self.stats.errors[type(res).__name__] += 1
                r.future.set_exception(res)
            else:
                if kind == "decode":
                    with self.cond:
                        self.stats.audio_seconds[served.name] += \
                            res.shape[-1] / served.codec.sample_rate
                r.future.set_result(res)

    def _retire(self, served: Served) -> None:
        """Streams that are over leave: finished ones end their output; slots are reset and
        freed (engine lock held, worker thread)."""
        keep = []
        for s in served.streams:
            runner = served.runners[s.kind]
            if s.state == "finishing" and not runner.ready(s):
                s.state = "done"
                s.outbox.put(_END)
            if s.active:
                keep.append(s)
            elif s.slot is not None:
                runner.table.release(s.slot)
                s.slot = None
        served.streams[:] = keep

    def _has_work(self) -> bool:
        if self.warming.pending():
            return True
        for served in self.models.values():
            if served.requests:
                return True
            for s in served.streams:
                if not s.active or s.state == "finishing" or served.runners[s.kind].ready(s):
                    return True
        return False

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.stopping and not self._has_work():
                    self.cond.wait()
                if self.stopping and not self._has_work():
                    return
            try:
                ran = self._step(windows=True)
            except Exception:  # noqa: BLE001 - a bug here must not stop every stream
                log.exception("audiotok engine: a step failed")
                with self.cond:
                    self.stats.errors["EngineStepError"] += 1
                time.sleep(0.01)
                continue
            if not ran and self._due_at is not None:
                with self.cond:  # a push or a request wakes it earlier
                    self.cond.wait(max(0.0, self._due_at - time.monotonic()))

    # -- shutdown ------------------------------------------------------------------------------
    def close(self, timeout: float = 30.0) -> bool:
        """Stop taking new work, let open streams and queued requests finish (up to `timeout`
        seconds: streams still open then are aborted, requests failed), stop the worker.
        True when everything finished in time."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.accepting = False
            self.warming.tasks.clear()  # what is not warm yet will not be needed
        if self.worker is None:  # driven by step(): run what is left here
            while not self._drained() and time.monotonic() < deadline and self.step():
                pass
        with self.cond:
            clean = self.cond.wait_for(self._drained, max(0.0, deadline - time.monotonic()))
            if not clean:
                for served in self.models.values():
                    for s in list(served.streams):
                        self._abort(s, StreamClosed(f"stream {s.id} was cut off: the engine "
                                                    "shut down"))
                    while served.requests:
                        r = served.requests.popleft()
                        if r.future.set_running_or_notify_cancel():
                            r.future.set_exception(StreamClosed("the engine shut down"))
            self.stopping = True
            self.cond.notify_all()
        if self.worker is not None:
            self.worker.join(max(1.0, deadline - time.monotonic()))
        if self.worker is None or not self.worker.is_alive():
            with self.cond:  # free the slots of streams cut off above
                for served in self.models.values():
                    self._retire(served)
        return clean

    def _drained(self) -> bool:
        return all(not m.streams and not m.requests for m in self.models.values())

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _has_slot(s: Stream, runner) -> bool:
    """Whether the stream can run: it has its batch slot (a stream opened while a warm-up step
    held the last ones gets one when that step ends), or its runner needs none."""
    return s.slot is not None or not hasattr(runner, "table")
