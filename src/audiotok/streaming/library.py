"""The library's streams: push tokens, get audio; push audio, get tokens.

    with codec.stream_decoder(batch_size=1) as dec:
        for chunk in token_source:        # integer [B, K, t], any t >= 1
            pcm = dec.push(chunk)         # float32 [B, C, n]: the audio now final
        pcm = dec.flush()                 # the rest (nothing for a causal codec)

Each stream holds its own state (rows of its codec's Streamer), so streams and offline calls do
not disturb one another. The output equals the offline result of the whole sequence (up to
float rounding) for every exact stream; work per frame is constant and memory bounded.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import AudioError, CodesError
from . import open_streamer
from .base import TokenChunk
from .spec import Window


def _check_batch_size(batch_size) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


class _Stream:
    """A stream's rows inside `with`: opened on entry, released on exit."""

    direction = ""

    def __init__(self, codec, batch_size: int, window: Window | None = None,
                 options: dict | None = None):
        _check_batch_size(batch_size)
        self.codec, self.batch_size, self.window = codec, batch_size, window
        self.options = options or {}
        self.streamer = None
        self.row = None
        self.done = False

    def __enter__(self):
        self.streamer = open_streamer(self.codec, self.direction, window=self.window,
                                      capacity=self.batch_size)
        try:
            self.row = self.streamer.new(self.batch_size, **self.options)
        except BaseException:
            self.streamer.close()
            self.streamer = None
            raise
        self.done = False
        return self

    def __exit__(self, *exc):
        if self.streamer is not None:
            self.streamer.free(self.row)
            self.streamer.close()
        self.streamer = self.row = None

    def _check_open(self, pushing: bool = True) -> None:
        if self.streamer is None:
            raise RuntimeError("use the stream inside a `with` block")
        if self.done and pushing:
            raise RuntimeError("the stream has finished (flush() ended it)")

    def _run(self, x, units: int, ending: bool, scales: int = 0) -> torch.Tensor | None:
        """The step's output for input x of `units` units (None: nothing to run yet)."""
        if self.streamer.take(self.row, units, ending, scales) is None:
            return None
        with torch.inference_mode():
            return self.streamer.step([self.row], [x], [ending])[0]


class StreamDecoder(_Stream):
    """Tokens in, audio out, one push at a time (see the module docstring). For codes that
    carry segment scales, push(tokens, scales) also takes the scales [B, j] of the next j
    segments (a stream encoder's `scales`); a segment's audio waits for its scale."""

    direction = "decode"

    def __init__(self, codec, batch_size: int = 1, clamp: bool = False,
                 window: Window | None = None, options: dict | None = None):
        super().__init__(codec, batch_size, window, options)
        self.clamp = clamp
        self.frames = 0

    def push(self, tokens, scales=None) -> torch.Tensor:
        """Audio float32 [B, C, n] for tokens [B, K, t] (and the scales [B, j] of the next j
        segments, for codes that carry them): the samples these frames make final."""
        self._check_open()
        tokens = _token_chunk(tokens, self.batch_size, self.codec)
        if tokens.shape[-1]:
            tokens, _, _ = self.codec._check_codes(tokens, self.clamp)
        else:
            tokens = tokens.long()
        if scales is not None and not self.codec.streaming.scales:
            raise CodesError(f"{self.codec.title} codes carry no segment scales")
        scales = _scale_chunk(scales, self.batch_size)
        self.frames += tokens.shape[-1]
        out = self._run(TokenChunk(tokens, scales), tokens.shape[-1], False,
                        0 if scales is None else scales.shape[1])
        return self._audio(out)

    def flush(self) -> torch.Tensor:
        """The audio still held back (the stream's end); the stream is done after it (a second
        flush gives nothing more)."""
        self._check_open(pushing=False)
        empty = torch.zeros(self.batch_size, self.codec.num_codebooks, 0, dtype=torch.long)
        out = self._run(TokenChunk(empty), 0, True)
        self.done = True
        return self._audio(out)

    def _audio(self, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            return torch.zeros(self.batch_size, self.codec.channels, 0)
        out = out.float().cpu()
        return out if out.shape[0] == self.batch_size else \
            out.expand(self.batch_size, self.codec.channels, -1)


class StreamEncoder(_Stream):
    """Audio in (at the codec's input rate), tokens out as soon as each frame's samples are in;
    flush() encodes the last partial frame as the offline encode does. Audio [B, n], or
    [B, C, n] for a codec of C channels (mono [B, n] goes on every channel). For codes that
    carry segment scales, `scales` is every segment's so far ([B, S])."""

    direction = "encode"

    def __init__(self, codec, batch_size: int = 1):
        super().__init__(codec, batch_size)
        self.pending = torch.zeros(batch_size, codec.channels, 0)
        self.samples = 0

    def push(self, audio) -> torch.Tensor:
        """Tokens [B, K, t] (t >= 0) for audio [B, n] (or [B, C, n]) at the codec's rate."""
        self._check_open()
        chunk = _audio_chunk(audio, self.batch_size, self.codec.channels)
        self.samples += chunk.shape[-1]
        self.pending = torch.cat([self.pending, chunk], -1)
        return self._encode(False)

    def flush(self) -> torch.Tensor:
        """The tokens of the rest (the stream's end); the stream is done after it (a second
        flush gives nothing more)."""
        self._check_open(pushing=False)
        out = self._encode(True)
        self.done = True
        return out

    def _encode(self, ending: bool) -> torch.Tensor:
        n = self.streamer.take(self.row, self.pending.shape[-1], ending)
        if n is None:
            return torch.zeros(self.batch_size, self.codec.num_codebooks, 0, dtype=torch.long)
        x, self.pending = self.pending[..., :n], self.pending[..., n:]
        with torch.inference_mode():
            out = self.streamer.step([self.row], [x], [ending])[0].cpu()
        return out if out.shape[0] == self.batch_size else \
            out.expand(self.batch_size, -1, -1)

    @property
    def scales(self) -> torch.Tensor:
        """The scales [B, S] of the segments encoded so far (codes that carry them)."""
        if not self.codec.streaming.scales:
            raise AttributeError(f"{self.codec.title} codes carry no segment scales")
        if self.streamer is None:
            raise RuntimeError("use the stream inside a `with` block")
        return self.streamer.scales(self.row).expand(self.batch_size, -1)


def _token_chunk(tokens, batch_size: int, codec) -> torch.Tensor:
    t = tokens if isinstance(tokens, torch.Tensor) else torch.from_numpy(np.asarray(tokens))
    if t.ndim != 3 or t.shape[0] != batch_size or t.shape[1] != codec.num_codebooks:
        raise CodesError(f"pushed tokens must be [{batch_size}, {codec.num_codebooks}, t], got "
                         f"shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise CodesError(f"tokens must be integers, got dtype {t.dtype}")
    return t


def _audio_chunk(audio, batch_size: int, channels: int) -> torch.Tensor:
    """Pushed audio checked: [B, n] (on every channel) or [B, channels, n], float32 on the CPU."""
    x = audio if isinstance(audio, torch.Tensor) else torch.from_numpy(np.asarray(audio))
    if x.ndim == 2:
        x = x[:, None].expand(-1, channels, -1)
    want = f"[{batch_size}, n]" if channels == 1 else \
        f"[{batch_size}, n] or [{batch_size}, {channels}, n]"
    if x.ndim != 3 or x.shape[0] != batch_size or x.shape[1] != channels:
        raise AudioError(f"pushed audio must be {want}, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise AudioError(f"pushed audio must be float, got dtype {x.dtype}")
    x = x.detach().float().cpu()
    if not torch.isfinite(x).all():
        raise AudioError("pushed audio contains NaN or Inf")
    return x


def _scale_chunk(scales, batch_size: int) -> torch.Tensor | None:
    """Pushed segment scales checked: None, or finite floats [B, j]."""
    if scales is None:
        return None
    x = scales if isinstance(scales, torch.Tensor) else torch.from_numpy(np.asarray(scales))
    if x.ndim != 2 or x.shape[0] != batch_size or not x.is_floating_point():
        raise CodesError(f"pushed scales must be floats [{batch_size}, segments], got "
                         f"{x.dtype} {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise CodesError("pushed scales contain NaN or Inf")
    return x.float()
