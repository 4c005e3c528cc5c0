"""How a codec streams: one typed spec per codec class (Codec.streaming)."""

from __future__ import annotations

from dataclasses import dataclass

LAYERS, STEPS, WINDOWS, SEGMENTS, CHUNKS = "layers", "steps", "windows", "segments", "chunks"


@dataclass(frozen=True)
class Window:
    """Windowed re-decoding: each window decodes `left` frames before the frames it outputs and
    `lookahead` frames after them; a window outputs at most `chunk` frames (None: every frame
    that is ready); windows start at multiples of `align` frames. `exact`: such windows give the
    offline decode's audio (the decoder reaches no farther)."""

    left: int
    chunk: int | None
    lookahead: int
    align: int = 1
    exact: bool = False

    def __post_init__(self):
        if self.left < 0 or self.lookahead < 0 or self.align < 1 or \
                (self.chunk is not None and self.chunk < 1):
            raise ValueError(f"window frames must be left >= 0, chunk >= 1, lookahead >= 0, "
                             f"align >= 1; got {self.left}, {self.chunk}, {self.lookahead}, "
                             f"{self.align}")


@dataclass(frozen=True)
class StreamSpec:
    """What a codec does in each direction, one of:

    - "layers": causal end to end; every layer keeps its own state (a convolution its left
      context, a transformer its keys and values), so each frame runs once, exactly;
    - "steps": not causal, but each layer reaches a fixed distance ahead; each layer runs as a
      step that outputs what its input now fixes, so each frame runs once, exactly;
    - "windows" (decode): windows of frames re-decoded with context on both sides (`window`);
      exact where the decoder reaches no farther than the window's context;
    - "segments": whole segments, each with its own scale (codes that carry scales);
    - "chunks" (decode): the family's own chunk schedule (Codec.segment_stream), as its
      reference streams; not the offline decode (the family's page says how it differs);
    - None: no stream in that direction (encode and decode whole inputs).

    window: the windows of "windows" decoding, or those a "steps" decoder also offers (for a
    shorter lookahead than its exact stream). end_padding: how an encode stream's last partial
    frame is completed: "zeros" (to a whole frame, as the offline encode pads it) or "layers"
    (each convolution pads its own input at the end). pieces: frames per piece in which a
    "layers" codec runs long offline inputs through its stream (the same result; bounded
    memory), None for one pass. long_window: an offline whole-input approximation for long
    inputs (windows of `chunk` frames with `left` = `lookahead` frames of context)."""

    decode: str | None
    encode: str | None = None
    window: Window | None = None
    end_padding: str = "zeros"
    pieces: int | None = 32
    long_window: Window | None = None

    def __post_init__(self):
        if self.decode not in (LAYERS, STEPS, WINDOWS, SEGMENTS, CHUNKS, None):
            raise ValueError(f"decode stream kind {self.decode!r}")
        if self.encode not in (LAYERS, STEPS, SEGMENTS, None):
            raise ValueError(f"encode stream kind {self.encode!r}")
        if self.decode == WINDOWS and self.window is None:
            raise ValueError("a windowed decoder needs its window")
        if self.end_padding not in ("zeros", "layers"):
            raise ValueError(f"end_padding {self.end_padding!r}")

    @property
    def scales(self) -> bool:
        """The codes carry a scale per segment (Codes.scales)."""
        return self.decode == SEGMENTS
