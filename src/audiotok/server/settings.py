"""The engine's settings (no torch here: the command line builds them before the models load)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowSettings:
    """Windowed re-decoding of a non-causal codec's stream: each step decodes `left` frames
    already output (context), `chunk` new frames (output) and `lookahead` frames after them
    (context), and outputs the chunk. Output length is exact: every frame's samples are output
    once. Each codec has its measured default (codec.streaming.window; docs, its page)."""

    left: int = 10
    chunk: int = 25
    lookahead: int = 10

    def __post_init__(self):
        if self.left < 0 or self.chunk < 1 or self.lookahead < 0:
            raise ValueError(f"window frames must be left >= 0, chunk >= 1, lookahead >= 0; "
                             f"got {self.left}, {self.chunk}, {self.lookahead}")


@dataclass(frozen=True)
class EngineSettings:
    max_streams: int = 64  # open streams per model (batch slots)
    max_batch: int = 16  # streams per step
    max_step_frames: int = 8  # frames one stream contributes to a step
    max_backlog_seconds: float = 60.0  # a stream's waiting input, or unread output, at most
    max_queued_requests: int = 256  # offline requests waiting, per model
    batch_wait_ms: float = 2.0  # offline requests arriving within this window run together
    step_wait_ms: float = 20.0  # a stream step waits this long at most for other streams' frames
    max_offline_batch: int = 16  # offline requests per batch
    max_offline_batch_seconds: float = 120.0  # audio per offline batch
    max_request_seconds: float = 600.0  # one offline request's audio
    max_voices: int = 32  # voices kept for models that decode in one (server/voices.py)
    max_voice_seconds: float = 30.0  # prompt speech one voice is made from
    # non-causal codecs' stream windows; None: each codec's own (codec.streaming.window)
    window: WindowSettings | None = None

    def __post_init__(self):
        for name in ("max_streams", "max_batch", "max_step_frames", "max_queued_requests",
                     "max_offline_batch", "max_voices"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_backlog_seconds", "max_offline_batch_seconds",
                     "max_request_seconds", "max_voice_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("batch_wait_ms", "step_wait_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
