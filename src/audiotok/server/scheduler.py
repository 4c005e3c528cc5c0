"""What the engine runs next: a pure function of the streams and requests waiting, the
settings and the time, so that tests drive it without threads or models.

    plan = schedule(queues, requests, settings, now, windows=True)
    for batch in plan.streams: ...       # one runner call each: which streams, how much input
    for batch in plan.requests: ...      # offline requests, one padded batch each
    plan.due_at                           # when a deferred batch is due (the worker's wait)

For every model and stream kind with streams ready: those whose real-time playback would run
dry soonest first (new streams before any: first audio), at most `max_batch`. A paced runner's
work grows with each row's frames and pads every row to the longest, so a step gives each
stream the lower median of the ready streams' frames (1 to `max_step_frames`), and a stream
with more waiting gets the rest in later steps; an unpaced runner takes what each is ready
with. With `windows`, a batch waits up to `step_wait_ms` for the frames of other open streams
(streams push at their own moments; without the wait each step would run one or two of them),
unless a new stream waits for its first output, the batch is full, or every open stream has
frames waiting. Offline requests of a model run once the oldest has waited `batch_wait_ms` (or
the queue holds a full batch): the oldest and those of its kind after it, within the batch
limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .settings import EngineSettings


@dataclass(frozen=True)
class StreamView:
    """One open stream as the scheduler sees it."""

    key: object  # the engine's handle of the stream (opaque here)
    ready: int | None  # input units its runner would take now (None: not ready)
    frames: int  # the frames those units are (a paced runner's measure of work)
    is_open: bool  # still taking input (not finishing)
    new: bool  # no output yet
    deadline: float  # when a real-time player of its output would run dry
    waiting_since: float  # when its oldest waiting input came


@dataclass(frozen=True)
class QueueView:
    """The open streams of one model and kind, and its runner's pacing."""

    model: str
    kind: str
    streams: tuple[StreamView, ...]
    paced: bool
    unit_frames: int  # input units per frame (encode: samples; decode: 1)


@dataclass(frozen=True)
class RequestView:
    key: object
    kind: str  # "encode" | "decode"
    seconds: float  # the audio it stands for
    arrived: float


@dataclass(frozen=True)
class StreamBatch:
    """One runner call: streams[i] takes units[i] input units."""

    model: str
    kind: str
    streams: tuple
    units: tuple[int, ...]


@dataclass(frozen=True)
class RequestBatch:
    model: str
    kind: str
    requests: tuple


@dataclass(frozen=True)
class Plan:
    streams: tuple[StreamBatch, ...] = ()
    requests: tuple[RequestBatch, ...] = ()
    due_at: float | None = None  # the earliest deferred batch's due time

    def __bool__(self) -> bool:
        return bool(self.streams or self.requests)


def schedule(queues: list[QueueView], requests: dict[str, list[RequestView]],
             settings: EngineSettings, now: float, windows: bool = True) -> Plan:
    """The next step (see the module docstring). requests: model -> its queue, oldest first."""
    due = _Due()
    batches = []
    for q in queues:
        ready = [s for s in q.streams if s.ready is not None]
        if not ready or (windows and not _batch_due(q, ready, settings, now, due)):
            continue
        ready.sort(key=lambda s: s.deadline)
        batch = ready[: settings.max_batch]
        units = [s.ready for s in batch]
        if q.paced:
            n = step_frames([s.frames for s in batch], settings.max_step_frames)
            units = [min(s.ready, n * q.unit_frames) if s.frames > n else s.ready
                     for s in batch]
        batches.append(StreamBatch(q.model, q.kind, tuple(s.key for s in batch), tuple(units)))
    offline = []
    for model, queue in requests.items():
        picked = _requests_due(queue, settings, now, windows, due)
        if picked:
            offline.append(RequestBatch(model, picked[0].kind, tuple(r.key for r in picked)))
    return Plan(tuple(batches), tuple(offline), due.at)


def step_frames(waiting: list[int], limit: int) -> int:
    """Frames per row for a step whose streams have `waiting` frames each: their lower median,
    1 to `limit`."""
    return max(1, min(limit, sorted(waiting)[(len(waiting) - 1) // 2]))


@dataclass
class _Due:
    at: float | None = field(default=None)

    def note(self, when: float) -> None:
        self.at = when if self.at is None else min(self.at, when)


def _batch_due(q: QueueView, ready: list[StreamView], settings: EngineSettings, now: float,
               due: _Due) -> bool:
    """Whether a stream batch should run now rather than wait for more streams' frames (else
    its due time is noted)."""
    if len(ready) >= settings.max_batch or any(s.new for s in ready):
        return True
    if all(s.ready is not None for s in q.streams if s.is_open):
        return True
    when = min(s.waiting_since for s in ready) + settings.step_wait_ms / 1000
    if now >= when:
        return True
    due.note(when)
    return False


def _requests_due(queue: list[RequestView], settings: EngineSettings, now: float,
                  windows: bool, due: _Due) -> list[RequestView]:
    if not queue:
        return []
    if windows and now - queue[0].arrived < settings.batch_wait_ms / 1000 and \
            len(queue) < settings.max_offline_batch:
        due.note(queue[0].arrived + settings.batch_wait_ms / 1000)
        return []
    kind, batch, seconds = queue[0].kind, [], 0.0
    for r in queue:
        if r.kind != kind:
            continue
        if batch and (len(batch) >= settings.max_offline_batch or
                      seconds + r.seconds > settings.max_offline_batch_seconds):
            break
        batch.append(r)
        seconds += r.seconds
    return batch
