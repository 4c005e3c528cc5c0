"""Streaming: one protocol (base.Streamer) that the library's stream_decoder()/stream_encoder()
and the server's engine both drive, four implementations of it, chosen in one place
by the codec's StreamSpec (spec.py):

- layers.py: causal codecs, every layer carrying its own state (slots.py, graphs.py);
- steps.py: decoders of bounded reach, every layer a step that outputs what is final;
- windows.py: windows of frames re-decoded with context;
- segments.py: whole segments with their scales, or a family's own chunks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import AudiotokError
from .spec import CHUNKS, LAYERS, SEGMENTS, STEPS, WINDOWS, StreamSpec, Window

if TYPE_CHECKING:
    from .base import Streamer

__all__ = ["CHUNKS", "LAYERS", "SEGMENTS", "STEPS", "WINDOWS", "StreamSpec", "Streamer",
           "TokenChunk", "Window", "open_streamer"]


def __getattr__(name: str):  # torch loads with the streamers, not with the specs
    if name in ("Streamer", "TokenChunk"):
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module 'audiotok.streaming' has no attribute {name!r}")


def open_streamer(codec, direction: str, *, window: Window | None = None, capacity: int = 1,
                  graphs: bool = False, max_frames: int = 8) -> Streamer:
    """The Streamer of `codec` in `direction` ("decode" or "encode"). window: decode in
    windows instead of the codec's own kind (a "steps" or "windows" decoder). capacity: rows
    at most (a "layers" codec's slots); graphs: its steps as CUDA graphs; max_frames: the most
    frames a step gives a row. AudiotokError where the codec has no such stream."""
    spec = codec.streaming
    kind = spec.decode if direction == "decode" else spec.encode
    refusal = codec.stream_refusal(direction) if kind is not None else None
    if kind is None or refusal:
        raise AudiotokError(refusal or no_stream(codec, direction))
    if direction == "decode" and (window is not None or kind == WINDOWS):
        from .windows import WindowStreamer

        return WindowStreamer(codec, window or spec.window)
    if kind == LAYERS:
        from .layers import LayerStreamer

        return LayerStreamer(codec, direction, capacity, graphs=graphs, max_frames=max_frames)
    if kind == STEPS:
        from .steps import StepStreamer

        return StepStreamer(codec, direction)
    from .segments import SegmentStreamer

    return SegmentStreamer(codec, direction, mode="chunked" if kind == CHUNKS else "segments")


def no_stream(codec, direction: str) -> str:
    """Why `codec` has no exact stream in `direction`."""
    how = "stateful or exact windowed decoder" if direction == "decode" else "stateful encoder"
    return (f"{codec.title} has no exact stream {direction}r here (it is not causal, and has "
            f"no {how}); use encode()/decode() on whole inputs")
