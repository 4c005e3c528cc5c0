"""Serving: an in-process engine that batches many concurrent streams (engine.py, no web code),
and the HTTP/WebSocket app on top of it. Importing this package imports no torch (the web app
starts before the models load); the engine's names load on first use."""

from __future__ import annotations

from importlib import import_module

from .errors import EngineBusy, EngineError, StreamClosed
from .settings import EngineSettings, WindowSettings

_LAZY = {"Engine": ".engine", "EngineStats": ".stats", "DecodeStream": ".streams",
         "EncodeStream": ".streams", "ScaledTokens": ".requests",
         "UtteranceTokens": ".requests"}

__all__ = ["DecodeStream", "EncodeStream", "Engine", "EngineBusy", "EngineError",
           "EngineSettings", "EngineStats", "ScaledTokens", "StreamClosed", "UtteranceTokens",
           "WindowSettings"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'audiotok.server' has no attribute {name!r}")
