"""The engine's counters and histograms since it started (the server exports them as Prometheus
metrics, metrics.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


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
