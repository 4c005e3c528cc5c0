"""Serving: an in-process engine that batches many concurrent streams (engine.py, no web code),
and the HTTP/WebSocket app on top of it."""

from .batches import WindowSettings
from .engine import Engine, EngineSettings, EngineStats
from .streams import DecodeStream, EncodeStream, EngineBusy, EngineError, StreamClosed

__all__ = ["DecodeStream", "EncodeStream", "Engine", "EngineBusy", "EngineError",
           "EngineSettings", "EngineStats", "StreamClosed", "WindowSettings"]
