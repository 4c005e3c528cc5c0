"""A small client for the server's WebSocket streams (websockets' sync client; `audiotok[serve]`).

    from audiotok.server.client import stream_decode
    audio, summary, chunks = stream_decode("ws://127.0.0.1:8000", tokens, model="tts")

    with DecodeStreamClient("ws://127.0.0.1:8000", model="tts") as s:
        s.send(tokens[:, :4])            # [K, t] integers, as the LLM emits them
        pcm = s.recv()                   # float32 samples, as decoded
        s.end()                          # then recv() until None; s.summary holds the totals

    with DecodeStreamClient(url, ids="orpheus") as s:   # a language model's ids instead
        s.send_ids([128266, 132362])     # any count; s.send_text("<custom_token_10>") alike

A codec of C > 1 channels (`ready["channels"]`) gives PCM [C, n] and takes audio [C, n] (or
mono [n]); for codes that carry segment scales (EnCodec 48 kHz), a decode stream takes them
with `send(tokens, scales)` or `send_scales(scales)`, and an encode stream's `scales` holds
every segment's scale received so far. For codes that carry utterance tokens (BiCodec's 32
global tokens), a decode stream takes them when it opens: `DecodeStreamClient(url,
globals=codes.globals[0])`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .protocol import interleaved, pcm_bytes, pcm_samples, tokens_from_binary, tokens_to_binary


class StreamError(RuntimeError):
    """The server closed the stream with an error (code: the WebSocket close code)."""

    def __init__(self, code: int | None, reason: str):
        super().__init__(f"stream closed ({code}): {reason}")
        self.code = code
        self.reason = reason


def _closed(e) -> StreamError:
    rcvd = e.rcvd
    return StreamError(rcvd.code if rcvd else None, rcvd.reason if rcvd else "connection lost")


class _Client:
    path = ""

    def __init__(self, url: str, start: dict, api_key: str | None = None,
                 open_timeout: float = 30.0):
        from websockets.sync.client import connect

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self.ws = connect(url.rstrip("/") + self.path, additional_headers=headers,
                          open_timeout=open_timeout, max_size=None).__enter__()
        self.summary: dict | None = None
        self._send(json.dumps({"type": "start", **start}))
        self.ready = self._json(self._recv(open_timeout))
        if self.ready.get("type") != "ready":
            raise StreamError(None, f"unexpected first message {self.ready}")

    def _recv(self, timeout: float | None):
        from websockets.exceptions import ConnectionClosed

        try:
            return self.ws.recv(timeout)
        except ConnectionClosed as e:
            raise _closed(e) from None

    def _send(self, message) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            self.ws.send(message)
        except ConnectionClosed as e:
            raise _closed(e) from None

    def _json(self, msg) -> dict:
        doc = json.loads(msg)
        if doc.get("type") == "error":
            self._recv_close()
            raise StreamError(doc.get("code"), doc.get("message", ""))
        return doc

    def _recv_close(self) -> None:
        try:
            while True:
                self._recv(5)
        except (StreamError, TimeoutError):
            pass

    def _next(self, timeout: float | None):
        """The next binary payload, or None at the end (summary kept)."""
        msg = self._recv(timeout)
        if isinstance(msg, bytes):
            return msg
        doc = self._json(msg)
        if doc.get("type") == "done":
            self.summary = doc
            self._recv_close()
            return None
        return doc

    def end(self) -> None:
        self._send(json.dumps({"type": "end"}))

    def close(self) -> None:
        self.ws.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class DecodeStreamClient(_Client):
    """Tokens in, PCM out (see the module docstring)."""

    path = "/v1/stream/decode"

    def __init__(self, url: str, model: str | None = None, *, sample_format: str = "f32le",
                 clamp: bool = False, binary: bool = True, ids: str | None = None,
                 ids_offset: int = 0, globals=None, **kw):
        """globals [G]: the utterance tokens, for a model whose codes carry them."""
        start = {"sample_format": sample_format, "clamp": clamp}
        if model is not None:
            start["model"] = model
        if globals is not None:
            start["globals"] = np.asarray(globals).reshape(-1).tolist()
        if ids is not None:
            start.update(ids=ids, ids_offset=ids_offset)
        super().__init__(url, start, **kw)
        self.sample_format = sample_format
        self.binary = binary

    def send(self, tokens, scales=None) -> None:
        """Tokens [K, t]; `scales`: the next segments' scales, for codes that carry them."""
        if scales is not None:
            self.send_scales(scales)
        t = np.asarray(tokens)
        if self.binary:
            self._send(tokens_to_binary(t))
        else:
            self._send(json.dumps({"type": "tokens", "tokens": t.tolist()}))

    def send_scales(self, scales) -> None:
        """The scales of the next segments (codes that carry them), in any pieces."""
        self._send(json.dumps({"type": "scales",
                               "scales": np.asarray(scales, dtype=float).reshape(-1).tolist()}))

    def send_ids(self, ids) -> None:
        """Language model ids (a stream opened with ids=...), any count."""
        a = np.asarray(ids).reshape(-1)
        if self.binary:
            self._send(a.astype("<i4").tobytes())
        else:
            self._send(json.dumps({"type": "ids", "ids": a.tolist()}))

    def send_text(self, text: str) -> None:
        """Language model text (a stream opened with ids=...), tokens may be split."""
        self._send(json.dumps({"type": "text", "text": text}))

    def recv(self, timeout: float | None = None) -> np.ndarray | None:
        """The next PCM: [n], or [C, n] for a codec of C > 1 channels; None at the end."""
        out = self._next(timeout)
        if out is None:
            return None
        return interleaved(pcm_samples(out, self.sample_format), self.ready.get("channels", 1))


class EncodeStreamClient(_Client):
    """PCM in (any rate), tokens [K, t] out."""

    path = "/v1/stream/encode"

    def __init__(self, url: str, model: str | None = None, *, sample_rate: int | None = None,
                 sample_format: str = "f32le", channels: int | None = None, **kw):
        start = {"sample_format": sample_format, "token_format": "binary"}
        if model is not None:
            start["model"] = model
        if sample_rate is not None:
            start["sample_rate"] = sample_rate
        if channels is not None:  # 1: mono input for a stereo codec (on both channels)
            start["channels"] = channels
        super().__init__(url, start, **kw)
        self.sample_format = sample_format
        self.channels = self.ready.get("input_channels", 1)
        self.scales: list[float] = []  # every segment's scale so far (codes that carry them)

    def send(self, audio) -> None:
        """Audio [n], or [C, n] for a stream of C > 1 input channels."""
        x = np.asarray(audio, dtype=np.float32)
        if x.ndim != (1 if self.channels == 1 else 2) or \
                (x.ndim == 2 and x.shape[0] != self.channels):
            want = "[n]" if self.channels == 1 else f"[{self.channels}, n]"
            raise ValueError(f"audio must be {want}, got shape {x.shape}")
        self._send(pcm_bytes(x, self.sample_format))

    def recv(self, timeout: float | None = None) -> np.ndarray | None:
        """The next tokens [K, t]; None at the end."""
        while isinstance(out := self._next(timeout), dict):  # a scales message
            if out.get("type") == "scales":
                self.scales += out["scales"]
        return None if out is None else tokens_from_binary(out, self.ready["num_codebooks"])


@dataclass
class StreamTimes:
    """When each push was sent and each chunk arrived (time.monotonic), for latency metrics."""

    pushes: list[float] = field(default_factory=list)
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, samples)


def stream_decode(url: str, tokens, model: str | None = None, *, push_frames: int = 1,
                  realtime: bool = False, scales=None, **kw
                  ) -> tuple[np.ndarray, dict, StreamTimes]:
    """Decode tokens [K, T] through a WebSocket stream, `push_frames` per message (every
    push_frames / frame_rate seconds with realtime=True); `scales`: their segments' scales, for
    codes that carry them; `globals=` (in kw): the utterance tokens, for codes that carry them.
    Returns the audio ([N] or [C, N]), the server's summary and the times."""
    tokens = np.asarray(tokens)
    times = StreamTimes()
    with DecodeStreamClient(url, model, **kw) as s:
        rate = s.ready["sample_rate"] / s.ready["samples_per_frame"]
        errors: list[BaseException] = []

        def sender():
            try:
                start = time.monotonic()
                if scales is not None:
                    s.send_scales(scales)
                for i, a in enumerate(range(0, tokens.shape[1], push_frames)):
                    if realtime:
                        time.sleep(max(0.0, start + i * push_frames / rate - time.monotonic()))
                    times.pushes.append(time.monotonic())
                    s.send(tokens[:, a: a + push_frames])
                s.end()
            except Exception as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        chunks = []
        while (pcm := s.recv(timeout=120)) is not None:
            times.chunks.append((time.monotonic(), pcm.shape[-1]))
            chunks.append(pcm)
        thread.join()
        if errors:
            raise errors[0]
        channels = s.ready.get("channels", 1)
        audio = np.concatenate(chunks, -1) if chunks else \
            np.zeros(0 if channels == 1 else (channels, 0), np.float32)
        return audio, s.summary, times
