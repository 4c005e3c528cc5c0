"""The serving engine: loaded codecs, one worker thread that runs every model call, many
concurrent streams batched step by step, and offline requests batched in short windows.

    engine = Engine({"tts": audiotok.load(name)}, EngineSettings(max_streams=64))
    with engine.open_decode_stream("tts") as s:      # streams.py: push, read, finish
        s.push(tokens); pcm = s.read()
    tokens = engine.encode("tts", audio).result()    # offline: concurrent.futures.Future
    tokens = await engine.aencode("tts", audio)      # the same from asyncio
    engine.close()                                    # drain, then stop the worker

What runs when is scheduler.py's (a pure function of what waits); how a stream's step runs is
its runner's (runner.py, over the codec's Streamer). The engine holds the lock and the worker
loop, admits streams and requests, and executes each plan: under the lock it takes the plan's
input out of the streams, outside it runs the model calls, then hands the outputs over. Between
steps it runs one shape of the warm-up (warmup.py). Admission is bounded everywhere: open
streams (`max_streams`), queued offline requests, and each stream's input and unread output
(`max_backlog_seconds`); beyond a bound the caller gets EngineBusy at once. No web code here.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from ..codec import Codec
from ..errors import AudioError, AudiotokError
from .requests import run_offline
from .runner import Runner
from .scheduler import QueueView, RequestView, StreamView, schedule
from .settings import EngineSettings
from .stats import EngineStats
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
from .voices import Voices
from .warmup import Warmup

log = logging.getLogger("audiotok.server")


@dataclass
class _Request:
    kind: str  # "encode" | "decode"
    payload: object
    seconds: float  # audio it stands for
    future: Future
    arrived: float


class Served:
    """One loaded model and everything the engine keeps for it: its open streams, its queued
    requests, and a runner per stream kind its codec streams."""

    def __init__(self, name: str, codec: Codec, settings: EngineSettings):
        self.name = name
        self.codec = codec
        self.streams: list[Stream] = []
        self.requests: deque[_Request] = deque()
        self.runners: dict[str, Runner] = {}
        for kind in ("decode", "encode"):
            if (codec.streaming.decode if kind == "decode" else codec.streaming.encode) and \
                    not codec.stream_refusal(kind):
                self.runners[kind] = Runner(codec, kind, settings)


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
        self.voices = Voices(self.settings.max_voices, self.settings.max_voice_seconds)
        self.cond = threading.Condition()
        self.accepting = True
        self.stopping = False
        self._ids = itertools.count(1)
        self.worker: threading.Thread | None = None
        self._due_at: float | None = None  # when a deferred batch is due (worker's wait)
        self.warming = Warmup()  # start_warmup() plans it; the worker runs it between steps
        self._on_warm = None
        self._warm_held: dict[tuple[str, str], int] = {}  # rows a warm-up step holds
        if start:
            self.worker = threading.Thread(target=self._loop, name="audiotok-engine",
                                           daemon=True)
            self.worker.start()

    # -- streams -------------------------------------------------------------------------------
    def open_decode_stream(self, model: str, *, clamp: bool = False, voice: str | None = None,
                           exact: bool = False, globals=None) -> DecodeStream:
        """A new decode stream (tokens in, audio out); EngineBusy when `max_streams` are open.
        voice: the id of a stored voice, for a model that decodes in one; exact: such a
        model's exact stream instead of its reference's (S3: decode(chunked=True)'s audio);
        globals [G]: the utterance tokens, for a model whose codes carry them."""
        return self._open(DecodeStream, model, clamp, voice, exact, globals)

    def open_encode_stream(self, model: str) -> EncodeStream:
        """A new encode stream (audio in, tokens out), for a codec that streams its encoder."""
        served = self._served(model)
        if "encode" not in served.runners:
            codec = served.codec
            why = "its settings keep no bounded encoder state" if codec.streaming.encode else \
                "it is not causal"
            raise EngineError(f"model {model!r} ({codec.title}) cannot encode a stream "
                              f"({why}); send the whole audio to encode")
        return self._open(EncodeStream, model, False)

    def _open(self, cls, model: str, clamp: bool, voice: str | None = None,
              exact: bool = False, utterance=None) -> Stream:
        served = self._served(model)
        conditioning = {}
        if cls.kind == "decode":
            _check_decodes(model, served.codec)
            conditioning = self.voices.conditioning(model, served.codec, voice)
            utterance = served.codec.check_globals(utterance, 1, clamp)
            if utterance is not None:
                conditioning["globals"] = utterance
            if exact:
                if not conditioning:
                    raise EngineError(f"model {model!r} ({served.codec.title}) has one kind of "
                                      "decode stream: exact=true does not apply")
                conditioning["exact"] = True
        if cls.kind not in served.runners:
            why = served.codec.stream_refusal(cls.kind)
            raise EngineError(f"model {model!r} ({served.codec.title}) cannot {cls.kind} a "
                              f"stream{f' ({why})' if why else ''}; send the whole input")
        with self.cond:
            self._check_accepting()
            if len(served.streams) >= self.settings.max_streams:
                raise EngineBusy(f"model {model!r} has {len(served.streams)} open streams "
                                 f"(max_streams {self.settings.max_streams}); try again later")
            s = cls(self, model, served.codec, next(self._ids), clamp=clamp)
            s.conditioning = conditioning
            runner = served.runners[s.kind]
            # a warm-up step holding the last rows gives them back after that step (_warm_one),
            # and the rows of aborted streams come back at the next step: meanwhile, no row
            if not runner.admit(s) and not self._warm_held.get((model, s.kind)):
                raise EngineBusy(f"model {model!r}: no free {s.kind} slot; try again later")
            served.streams.append(s)
        return s

    def submit(self, s: Stream, chunk, units: int, scales: np.ndarray | None = None) -> None:
        """Queue a stream's input (`units` frames or samples; a decode stream's segment scales):
        EngineBusy past the backlog limits, StreamClosed once it is finishing or over."""
        with self.cond:
            self._admit_input(s, units)
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

    def _admit_input(self, s: Stream, units: int) -> None:
        if s.state != "open":
            raise StreamClosed(f"stream {s.id} is {s.state}; no more input")
        limit = self.settings.max_backlog_seconds
        codec = s.codec
        rate = codec.frame_rate if s.unit == "frame" else codec.input_rate
        backlog = (s.held + units) / rate
        unread = s.outbox.queued_samples / (codec.sample_rate if s.kind != "encode"
                                            else codec.frame_rate)
        if backlog > limit or unread > limit:
            what = "input waiting" if backlog > limit else "output unread"
            raise EngineBusy(f"stream {s.id}: more than {limit:g} s of {what}; push slower or "
                             "read the output")
        if s.first_push is None:
            s.first_push = time.monotonic()

    def finish(self, s: Stream) -> None:
        """End of a stream's input: its output ends after what is held back."""
        with self.cond:
            if s.state == "open":
                s.state = "finishing"
                self.cond.notify_all()

    def abort(self, s: Stream, error: BaseException | None = None) -> None:
        """Drop a stream's input and end its output now (with `error`: as failed); its row is
        freed at the next step (the worker may be mid-step on it)."""
        with self.cond:
            if not s.active:
                return
            s.state = "aborted" if error is None else "failed"
            s.error = error
            s.pending.clear()
            s.held = 0
            if isinstance(s, DecodeStream):
                s.scales_pending.clear()
            s.outbox.put(_END if error is None else error)
            if error is not None:
                self.stats.errors[type(error).__name__] += 1
            self.cond.notify_all()

    def stream_scales(self, s: EncodeStream) -> np.ndarray:
        """The scales [S] of the segments an encode stream has encoded so far."""
        with self.cond:
            return self.models[s.model].runners["encode"].scales(s)

    # -- offline requests ----------------------------------------------------------------------
    def encode(self, model: str, audio) -> Future:
        """Future of tokens int64 [K, T] for float audio [n] (a codec of C > 1 channels: [C, n]
        or mono [n]) at the codec's input rate; for codes that carry segment scales, of
        ScaledTokens(tokens, scales [S]); for a codec with utterance tokens, of
        UtteranceTokens(tokens, globals [G])."""
        served = self._served(model)
        x = check_audio_chunk(audio, served.codec.channels)
        if x.size == 0:
            raise AudioError("empty audio")
        seconds = x.shape[-1] / served.codec.input_rate
        return self._submit_request(served, "encode", x, seconds)

    def decode(self, model: str, tokens, *, num_samples: int | None = None,
               clamp: bool = False, scales=None, voice: str | None = None, globals=None
               ) -> Future:
        """Future of audio float32 [N] ([C, N] for C > 1 channels) for tokens [K, T] (N =
        num_samples when given, at most T * samples_per_frame); `scales` [S]: the segments'
        scales, for codes that carry them (without: each segment as decoded, unscaled);
        `voice`: the id of a kept voice, for a model that decodes in one (Engine.voices);
        `globals` [G]: the utterance tokens, for a model whose codes carry them."""
        served = self._served(model)
        _check_decodes(model, served.codec)
        conditioning = self.voices.conditioning(model, served.codec, voice)
        t = check_token_chunk(tokens, served.codec, clamp)
        if t.shape[1] == 0:
            raise AudiotokError("no frames to decode")
        if num_samples is not None and not 0 < num_samples <= t.shape[1] * \
                served.codec.samples_per_frame:
            raise AudiotokError(f"num_samples {num_samples} does not fit {t.shape[1]} frames")
        if scales is not None:
            scales = check_scales(scales, served.codec, t.shape[1])
        utterance = served.codec.check_globals(globals, 1, clamp)
        if utterance is not None:
            utterance = utterance[0]
        return self._submit_request(served, "decode",
                                    (t, num_samples, scales, utterance, conditioning),
                                    t.shape[1] / served.codec.frame_rate)

    async def aencode(self, model: str, audio) -> np.ndarray:
        return await asyncio.wrap_future(self.encode(model, audio))

    async def adecode(self, model: str, tokens, **kw) -> np.ndarray:
        return await asyncio.wrap_future(self.decode(model, tokens, **kw))

    def _submit_request(self, served: Served, kind: str, payload, seconds: float) -> Future:
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

    def load(self) -> dict:
        """Open streams and queued requests per model."""
        with self.cond:
            return {name: {"streams": len(m.streams), "queued_requests": len(m.requests),
                           "queued_frames": sum(s.held for s in m.streams if s.unit == "frame")}
                    for name, m in self.models.items()}

    def rows_in_use(self) -> int:
        """Stream rows held, over every model and stream kind."""
        with self.cond:
            return sum(len(r.rows) for m in self.models.values() for r in m.runners.values())

    # -- warm-up -------------------------------------------------------------------------------
    def start_warmup(self, on_model_done=None) -> None:
        """Queue the warm-up (warmup.py): every model's step shapes, run by the worker between
        real work, first phase first. `on_model_done(model, ModelWarmup)` is called (on the
        worker) as each model finishes. Streams and requests are served meanwhile."""
        rows = min(self.settings.max_batch, self.settings.max_streams)
        shapes = {(name, kind): runner.warm_shapes(rows, self.settings.max_step_frames)
                  for name, served in self.models.items()
                  for kind, runner in served.runners.items()}
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
        """Run the next warm-up shape (worker thread); False when none is left. It takes scratch
        rows like a stream; if fewer are free (real streams hold them), fewer run."""
        with self.cond:
            task = self.warming.next()
            if task is None:
                return False
            runner = self.models[task.model].runners[task.kind]
            rows = []
            while len(rows) < task.streams and (row := runner.streamer.new()) is not None:
                rows.append(row)
            self._warm_held[task.model, task.kind] = len(rows)
        start = time.perf_counter()
        try:
            if rows:
                runner.warm_rows(rows, task.frames)
        except Exception:  # noqa: BLE001 - a shape that fails here fails for its stream later
            log.exception("audiotok engine: warming %s %s (%d x %d) failed", task.model,
                          task.kind, task.streams, task.frames)
            with self.cond:
                self.stats.errors["WarmupError"] += 1
        finally:
            with self.cond:
                for row in rows:
                    runner.streamer.free(row)
                self._warm_held[task.model, task.kind] = 0
                for s in self.models[task.model].streams:  # opened while this step held rows
                    if s.kind == task.kind and s.active and not runner.has_row(s):
                        runner.admit(s)
                m = self.warming.record(task, time.perf_counter() - start)
                self.cond.notify_all()
        if m.done == m.total and self._on_warm is not None:  # the model's last shape
            self._on_warm(task.model, m)
        return True

    # -- the worker ----------------------------------------------------------------------------
    def step(self) -> bool:
        """Run what is ready now, without waiting for collection windows (for callers that
        drive the engine themselves); False when there was nothing."""
        return self._step(windows=False)

    def _step(self, windows: bool) -> bool:
        """One round of work: the scheduler's plan, its input taken under the lock, its model
        calls run outside it; then one warm-up shape. Returns whether anything ran."""
        jobs = []
        with self.cond:
            now = time.monotonic()
            for served in self.models.values():
                self._retire(served)
            plan = schedule(self._queues(), self._request_queues(), self.settings, now, windows)
            self._due_at = plan.due_at
            for b in plan.streams:
                served = self.models[b.model]
                runner = served.runners[b.kind]
                taken = [runner.gather(s, u) for s, u in zip(b.streams, b.units, strict=True)]
                jobs.append((served, b.kind, list(b.streams), [x for x, _ in taken],
                             [end for _, end in taken]))
            for rb in plan.requests:
                served = self.models[rb.model]
                for r in rb.requests:
                    served.requests.remove(r)
                picked = [r for r in rb.requests if r.future.set_running_or_notify_cancel()]
                jobs.append((served, "offline", picked, None, None))
        for served, kind, batch, inputs, ending in jobs:
            if kind == "offline":
                self._run_offline(served, batch)
            else:
                self._run_streams(served, kind, batch, inputs, ending)
        warmed = self.warming.pending() and self._warm_one()  # one shape between steps
        with self.cond:
            for served in self.models.values():
                self._retire(served)
            self.cond.notify_all()  # close() waits for the streams and requests to be done
        return bool(jobs) or warmed

    def _queues(self) -> list[QueueView]:
        """What the scheduler sees of every runner's streams (lock held)."""
        queues = []
        for served in self.models.values():
            for kind, runner in served.runners.items():
                views = []
                for s in served.streams:
                    if s.kind != kind or not s.active or not runner.has_row(s):
                        continue
                    ready = runner.ready(s)
                    frames = 0 if ready is None else max(1, -(-ready // runner.unit_frames))
                    views.append(StreamView(s, ready, frames, s.state == "open",
                                            s.first_output is None, s.deadline(),
                                            s.waiting_since))
                queues.append(QueueView(served.name, kind, tuple(views), runner.paced,
                                        runner.unit_frames))
        return queues

    def _request_queues(self) -> dict[str, list[RequestView]]:
        return {name: [RequestView(r, r.kind, r.seconds, r.arrived) for r in served.requests]
                for name, served in self.models.items() if served.requests}

    def _run_streams(self, served: Served, kind: str, batch: list[Stream], inputs: list,
                     ending: list[bool]) -> None:
        runner = served.runners[kind]
        start = time.perf_counter()
        try:
            outputs = runner.run(batch, inputs, ending)
        except Exception:  # noqa: BLE001 - retried one by one: a failure is its stream's own
            outputs = []
            for s, x, end in zip(batch, inputs, ending, strict=True):
                try:
                    outputs.append(runner.run([s], [x], [end])[0])
                except Exception as e:  # noqa: BLE001
                    outputs.append(e)
        elapsed = time.perf_counter() - start
        now = time.monotonic()
        codec = served.codec
        with self.cond:
            st = self.stats
            st.step(served.name, kind, len(batch), elapsed)
            for s, out in zip(batch, outputs, strict=True):
                if isinstance(out, Exception):
                    self.abort(s, EngineError(f"stream {s.id} failed: {type(out).__name__}: "
                                              f"{out}"))
                    continue
                if not s.active or out.size == 0:  # (a stateful stream's step may make no
                    continue  # sample final yet: nothing to send)
                if kind == "encode":
                    s.frames_out += out.shape[1]
                else:
                    s.samples_out += out.shape[-1]  # (a stateful stream's chunks: any size)
                    s.frames_out = s.samples_out // codec.samples_per_frame
                    st.audio_seconds[served.name] += out.shape[-1] / codec.sample_rate
                if s.first_output is None:
                    s.first_output = now
                    if s.first_push is not None:
                        st.first_audio.observe(now - s.first_push)
                s.outbox.put(out)

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
        """Streams that are over leave: finished ones end their output; rows are freed (engine
        lock held, worker thread)."""
        keep = []
        for s in served.streams:
            runner = served.runners[s.kind]
            if s.state == "finishing" and runner.has_row(s) and runner.ready(s) is None:
                s.state = "done"
                s.outbox.put(_END)
            if s.active:
                keep.append(s)
            else:
                runner.release(s)
        served.streams[:] = keep

    def _has_work(self) -> bool:
        if self.warming.pending():
            return True
        for served in self.models.values():
            if served.requests:
                return True
            for s in served.streams:
                runner = served.runners[s.kind]
                if not s.active or s.state == "finishing" or runner.ready(s) is not None:
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
                        self.abort(s, StreamClosed(f"stream {s.id} was cut off: the engine "
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
            with self.cond:  # free the rows of streams cut off above
                for served in self.models.values():
                    self._retire(served)
        return clean

    def _drained(self) -> bool:
        return all(not m.streams and not m.requests for m in self.models.values())

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_decodes(model: str, codec) -> None:
    """EngineError for an encode-only model."""
    if codec.decode_refusal is not None:
        raise EngineError(f"model {model!r}: {codec.decode_refusal}")
