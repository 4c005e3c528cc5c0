"""What the engine refuses, as exceptions (no torch here: the web app imports them before the
models load)."""

from __future__ import annotations

from ..errors import AudiotokError


class EngineError(AudiotokError):
    """A request the engine cannot take (see the subclasses)."""


class EngineBusy(EngineError):
    """Admission refused: too many streams or queued requests, or a stream's backlog is full.
    Try again later (HTTP 429, WebSocket close 1013)."""


class StreamClosed(EngineError):
    """Input to a stream that has finished, failed or been aborted, or to a closed engine."""


class HTTPError(Exception):
    """A request the web app refuses, with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
