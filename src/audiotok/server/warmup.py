"""Warm-up: each step shape run once before real streams need it (a new shape's first call costs
about twice a later one on the CPU; with CUDA graphs, a capture), in the engine's worker between
real work, so that a server answers at once and serves while it warms.

Two phases: first, for every model and stream kind, one stream at one frame (what a new stream
with the default push runs), so that the first streams are fast early; then every other batch
size and frame count. The engine is ready (/readyz 200) when every shape of every model is done
(docs/serving.md gives the times measured). Progress is reported throughout.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WarmTask:
    model: str
    kind: str
    streams: int
    frames: int
    first: bool  # in the first phase


@dataclass
class ModelWarmup:
    """One model's warm-up progress."""

    total: int = 0
    done: int = 0
    first_total: int = 0
    first_done: int = 0
    seconds: float = 0.0  # compute time spent warming
    started: float | None = None  # time.monotonic() of the start
    first_at: float | None = None  # ... when the first phase was done
    finished: float | None = None  # ... when every shape was done (the model is warm)

    def as_dict(self) -> dict:
        return {"shapes": self.total, "done": self.done, "complete": self.finished is not None,
                "seconds": round(self.seconds, 3),
                "first_phase_after_s": _since(self.started, self.first_at),
                "complete_after_s": _since(self.started, self.finished)}


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round(end - start, 3)


@dataclass
class Warmup:
    """The plan (a queue of tasks, first phase first) and the progress per model."""

    tasks: deque = field(default_factory=deque)
    models: dict[str, ModelWarmup] = field(default_factory=dict)

    def plan(self, shapes: dict[tuple[str, str], list[tuple[int, int]]]) -> None:
        """shapes: (model, kind) -> the (streams, frames) its runner warms; (1, 1) first."""
        now = time.monotonic()
        first, rest = [], []
        for (model, kind), pairs in shapes.items():
            m = self.models.setdefault(model, ModelWarmup(started=now))
            for streams, frames in dict.fromkeys(pairs):  # each shape once, in order
                is_first = (streams, frames) == pairs[0]
                (first if is_first else rest).append(WarmTask(model, kind, streams, frames,
                                                              is_first))
                m.total += 1
                m.first_total += is_first
        for m in self.models.values():
            if m.total == 0:  # nothing to warm (no stream runner): ready at once
                m.first_at = m.finished = now
        self.tasks.extend(first + rest)

    def pending(self) -> bool:
        return bool(self.tasks)

    def next(self) -> WarmTask | None:
        return self.tasks.popleft() if self.tasks else None

    def record(self, task: WarmTask, seconds: float) -> ModelWarmup:
        now = time.monotonic()
        m = self.models[task.model]
        m.done += 1
        m.seconds += seconds
        if task.first:
            m.first_done += 1
        if m.first_at is None and m.first_done == m.first_total:
            m.first_at = now
        if m.done == m.total:
            m.finished = now
        return m

    def complete(self) -> bool:
        """Every model is warm (True when no warm-up was asked for)."""
        return not self.tasks and all(m.finished is not None for m in self.models.values())

    def status(self) -> dict:
        return {name: m.as_dict() for name, m in self.models.items()}
