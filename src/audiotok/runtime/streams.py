"""Exact streaming through an export's step graphs: the state is explicit, fed and updated
push by push."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..codes import as_numpy
from ..errors import AudioError, CodesError

if TYPE_CHECKING:
    from .codec import OnnxCodec


class _OnnxStream:
    """A step graph and its state, fed and updated push by push; pushes longer than the graph's
    step are split."""

    graph = ""

    def __init__(self, codec: OnnxCodec, batch_size: int):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.codec, self.batch_size = codec, batch_size
        self.session = codec._step_session(self.graph)
        self.spec = codec.facts["state"][self.graph]
        self.state = None

    def __enter__(self):
        self.state = [np.zeros((self.batch_size, *s["shape"]), _DTYPES[s["dtype"]])
                      for s in self.spec]
        return self

    def __exit__(self, *exc):
        self.state = None

    def _check_open(self):
        if self.state is None:
            raise RuntimeError("use the stream inside a `with` block")

    def _run(self, name: str, x: np.ndarray, step: int) -> np.ndarray:
        """Run x ([B, ., n * step]) through the graph in pieces of at most `step` along its last
        axis, carrying the state."""
        out = []
        limit = self.codec.max_push_frames * step
        for start in range(0, x.shape[-1], limit):
            feed = {name: x[..., start: start + limit],
                    **{s["name"]: v for s, v in zip(self.spec, self.state, strict=True)}}
            y, *self.state = self.session.run(None, feed)
            out.append(y)
        return np.concatenate(out, -1)


class OnnxStreamDecoder(_OnnxStream):
    """Tokens in, audio out, push by push: equal to the offline decode of everything pushed."""

    graph = "decoder_step"

    def __init__(self, codec: OnnxCodec, batch_size: int = 1, clamp: bool = False):
        super().__init__(codec, batch_size)
        self.clamp = clamp

    def push(self, tokens) -> np.ndarray:
        """Audio float32 [B, 1, samples_per_frame * t] for tokens [B, K, t]."""
        self._check_open()
        codec = self.codec
        t = as_numpy(tokens)
        if t.ndim != 3 or t.shape[0] != self.batch_size or t.shape[1] != codec.num_codebooks:
            raise CodesError(f"pushed tokens must be [{self.batch_size}, {codec.num_codebooks}, "
                             f"t], got shape {tuple(t.shape)}")
        if t.dtype.kind not in "iu":
            raise CodesError(f"tokens must be integers, got dtype {t.dtype}")
        if t.shape[-1] == 0:
            return np.zeros((self.batch_size, 1, 0), np.float32)
        t, _, _ = codec.check_codes(t, self.clamp)
        return self._run("codes", t, 1)

    def flush(self) -> np.ndarray:
        """Audio still held back: none, since every frame's audio is returned when pushed."""
        self._check_open()
        return np.zeros((self.batch_size, 1, 0), np.float32)


class OnnxStreamEncoder(_OnnxStream):
    """Audio in (at the codec's rate), tokens out as soon as each frame's samples are complete:
    equal to the offline encode of everything pushed."""

    graph = "encoder_step"

    def __init__(self, codec: OnnxCodec, batch_size: int = 1):
        super().__init__(codec, batch_size)
        self.pending = np.zeros((batch_size, 0), np.float32)

    def push(self, audio) -> np.ndarray:
        """Tokens int64 [B, K, t] (t >= 0) for audio [B, n] at the codec's sample rate."""
        self._check_open()
        x = as_numpy(audio)
        if x.ndim != 2 or x.shape[0] != self.batch_size:
            raise AudioError(f"pushed audio must be [{self.batch_size}, n], got shape "
                             f"{tuple(x.shape)}")
        if x.dtype.kind != "f":
            raise AudioError(f"pushed audio must be float, got dtype {x.dtype}")
        if not np.isfinite(x).all():
            raise AudioError("pushed audio contains NaN or Inf")
        self.pending = np.concatenate([self.pending, x.astype(np.float32)], -1)
        spf = self.codec.samples_per_frame
        whole = self.pending.shape[-1] // spf * spf
        ready, self.pending = self.pending[:, :whole], self.pending[:, whole:]
        return self._encode(ready)

    def flush(self) -> np.ndarray:
        """Tokens of the last partial frame, padded as offline encode pads it: zeros up to a
        whole frame, or (an export whose graphs take any number of samples: OnnxCodec.raw_samples)
        the samples as they are, each convolution padding its own input."""
        self._check_open()
        spf = self.codec.samples_per_frame
        rest, self.pending = self.pending, np.zeros((self.batch_size, 0), np.float32)
        if rest.shape[-1] and not self.codec.raw_samples:
            rest = np.pad(rest, ((0, 0), (0, spf - rest.shape[-1])))
        return self._encode(rest)

    def _encode(self, audio: np.ndarray) -> np.ndarray:
        if audio.shape[-1] == 0:
            return np.zeros((self.batch_size, self.codec.num_codebooks, 0), np.int64)
        return self._run("audio", audio[:, None], self.codec.samples_per_frame).astype(np.int64)


_DTYPES = {"float32": np.float32, "int64": np.int64, "float16": np.float16}
