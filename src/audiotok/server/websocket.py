"""The WebSocket stream protocol (docs: serving):

    client: {"type": "start", "model": "tts", "sample_format": "s16le", "clamp": false}
    server: {"type": "ready", "stream": 7, "sample_rate": 44100, "num_codebooks": 10, ...}
    client: token frames: binary (int32 LE, frame-major) or {"type": "tokens", "tokens": [K][t]}
    server: binary PCM as each push is decoded
    client: {"type": "end"}
    server: the rest of the audio, {"type": "done", "frames": n, "samples": m}, close 1000

A decode stream can take a language model's token ids instead ("ids": a scheme whose frames
follow one another and that needs no tokenizer, e.g. "orpheus"; "generic" with "ids_offset"):
binary int32 LE ids in any count, {"type": "ids", "ids": [...]} or {"type": "text", "text":
"<custom_token_...>..."} in any pieces; the scheme's end of speech ends the input like "end",
and "done" says how many ids of an incomplete last frame were dropped ("dropped_ids"). A model
that decodes in a voice (S3 token to audio) takes the id of a stored voice in the start
message ("voice": ID, from POST /v1/voices), and "exact": true for its exact stream. A codec
whose codes carry utterance tokens ("global_tokens": G in "ready", BiCodec's) takes the
utterance's G tokens in the start message ("globals": [...]).

The encode stream is the same with audio in (binary PCM at "sample_rate", any rate) and token
messages out ("token_format": "json" or "binary"). A codec of C > 1 channels ("channels" in
"ready") sends and takes PCM with its channels interleaved; an encode stream's start may say
"channels": 1 for mono input, which goes on every channel. For codes that carry segment scales
("segment_scales": true in "ready"), the encode stream sends {"type": "scales", "first": i,
"scales": [...]} (segments i, i + 1, ...) before the tokens it sends next, and the decode
stream takes them the same way ({"type": "scales", "scales": [...]}, the next segments', in
any pieces, before or after their tokens); a segment's audio waits for its scale. Errors:
{"type": "error", "message"} and a close code: 1007 bad data, 1008 policy (API key, idle),
1009 message too big, 1011 server error, 1013 try again later (busy or shutting down).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import numpy as np

from ..errors import AudiotokError
from ..export.llm import IdReader, TokenIdError, scheme_for
from .errors import EngineBusy, HTTPError, StreamClosed
from .protocol import (
    check_sample_format,
    ids_from_binary,
    ids_from_json,
    interleaved,
    pcm_bytes,
    pcm_samples,
    tokens_from_binary,
    tokens_from_json,
    tokens_to_binary,
)


class Close(Exception):
    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


def _close_code(e: BaseException) -> int:
    if isinstance(e, Close):
        return e.code
    if isinstance(e, (EngineBusy, StreamClosed)):
        return 1013
    if isinstance(e, AudiotokError) or (isinstance(e, HTTPError) and e.status < 500):
        return 1007  # (bad data, or what the app refuses: an unknown voice)
    return 1011


async def _receive(ws, state, timeout: float) -> str | bytes | None:
    """The next message (None: the client closed)."""
    from starlette.websockets import WebSocketDisconnect

    try:
        msg = await asyncio.wait_for(ws.receive(), timeout)
    except asyncio.TimeoutError:
        raise Close(1008, f"no message for {timeout:g} s (idle stream)") from None
    except WebSocketDisconnect:
        return None
    if msg["type"] == "websocket.disconnect":
        return None
    data = msg.get("bytes") if msg.get("bytes") is not None else msg.get("text")
    if data is None:
        raise Close(1007, "empty message")
    if len(data) > state.settings.max_message_bytes:
        raise Close(1009, f"message of {len(data)} bytes is over the limit of "
                          f"{state.settings.max_message_bytes}")
    return data


def _json(data: str | bytes, expect: tuple[str, ...]) -> dict:
    if isinstance(data, bytes):
        raise Close(1007, f"expected a JSON message ({' or '.join(expect)}), got binary")
    try:
        doc = json.loads(data)
    except ValueError:
        raise Close(1007, f"not valid JSON: {data[:60]!r}") from None
    if not isinstance(doc, dict) or doc.get("type") not in expect:
        raise Close(1007, f"expected a message of type {' or '.join(expect)}, got "
                          f"{str(doc)[:80]}")
    return doc


async def _session(ws, state, kind: str) -> None:
    """Accept, check the key and the start message, open the engine stream, pump both ways."""
    await ws.accept()
    stream = None
    try:
        if not state.authorized(ws.headers, ws.query_params):
            raise Close(1008, "missing or wrong API key")
        if state.draining:
            raise Close(1013, "the server is shutting down")
        first = await _receive(ws, state, state.settings.idle_timeout)
        if first is None:
            return
        start = _json(first, ("start",))
        if state.engine is None:  # the models are still loading: wait for them
            try:
                await state.get_engine()
            except Exception as e:  # noqa: BLE001 - HTTPError of the app: loading failed
                raise Close(1011, str(e)) from None
        stream, ready, read_input, write_output, summary = _open(state, kind, start)
        await ws.send_text(json.dumps(ready))
        state.websockets += 1
        try:
            await _pump(ws, state, stream, read_input, write_output)
        finally:
            state.websockets -= 1
        await ws.send_text(json.dumps({"type": "done", **_totals(stream), **summary()}))
        await ws.close(1000)
    except Exception as e:  # noqa: BLE001 - every failure closes this socket only
        if stream is not None:
            stream.abort()
        code = _close_code(e)
        reason = str(e) if code != 1011 else f"server error: {type(e).__name__}: {e}"
        with contextlib.suppress(Exception):
            await ws.send_text(json.dumps({"type": "error", "message": reason, "code": code}))
            await ws.close(code, reason[:120])


def _totals(stream) -> dict:
    if stream.kind == "decode":
        return {"frames": stream.frames_in, "samples": stream.samples_out}
    return {"frames": stream.frames_out, "samples": stream.samples_in}


def _open(state, kind: str, start: dict):
    """The session a start message asks for (its model, its facts for "ready")."""
    engine = state.engine
    name = start.get("model")
    if name is None and len(engine.models) == 1:
        name = next(iter(engine.models))
    if name not in engine.models:
        raise Close(1007, f"unknown model {name!r}; loaded: {', '.join(engine.models)}")
    codec = engine.models[name].codec
    sample_format = check_sample_format(str(start.get("sample_format", "s16le")))
    facts = {"type": "ready", "model": name, "sample_rate": codec.sample_rate,
             "samples_per_frame": codec.samples_per_frame,
             **({"encode_sample_rate": codec.input_rate} if codec.input_rate != codec.sample_rate
                else {}),
             "num_codebooks": codec.num_codebooks, "codebook_sizes": list(codec.codebook_sizes),
             "channels": codec.channels, "sample_format": sample_format}
    if codec.streaming.scales:
        facts["segment_scales"] = True
    if codec.global_tokens:
        facts["global_tokens"] = codec.global_tokens
    session = (DecodeSession if kind == "decode" else EncodeSession)(
        engine, name, codec, start, sample_format)
    return session.stream, {**facts, **session.facts}, session.read_input, \
        session.write_output, session.summary


class DecodeSession:
    """A decode stream's WebSocket side: token frames (or a language model's ids, and segment
    scales) in, PCM out."""

    def __init__(self, engine, name: str, codec, start: dict, sample_format: str):
        clamp = start.get("clamp", False)
        if not isinstance(clamp, bool):
            raise Close(1007, "clamp must be true or false")
        self.codec, self.sample_format = codec, sample_format
        self.ids = _id_reader(start, codec)
        voice, exact = start.get("voice"), start.get("exact", False)
        if voice is not None and not isinstance(voice, str):
            raise Close(1007, "voice must be a voice id (a string)")
        if not isinstance(exact, bool):
            raise Close(1007, "exact must be true or false")
        self.stream = engine.open_decode_stream(name, clamp=clamp, voice=voice, exact=exact,
                                                globals=start.get("globals"))
        self.facts = {"stream": self.stream.id,
                      "decode": engine.models[name].runners["decode"].mode}
        if self.ids is not None:
            self.facts["ids"] = self.ids.scheme.describe()

    def read_input(self, data) -> bool:
        """Feed one message to the stream; False at the end of input."""
        if self.ids is not None:
            return _read_ids(data, self.ids, self.stream)
        codec = self.codec
        if isinstance(data, bytes):
            self.stream.push(tokens_from_binary(data, codec.num_codebooks))
            return True
        doc = _json(data, ("tokens", "scales", "end") if codec.streaming.scales
                    else ("tokens", "end"))
        if doc["type"] == "end":
            return False
        if doc["type"] == "scales":
            self.stream.push(np.zeros((codec.num_codebooks, 0), np.int64), doc.get("scales"))
            return True
        self.stream.push(tokens_from_json(doc.get("tokens")))
        return True

    async def write_output(self, ws, pcm) -> None:
        await ws.send_bytes(pcm_bytes(pcm, self.sample_format))

    def summary(self) -> dict:
        return {} if self.ids is None else {"dropped_ids": self.ids.dropped}


class EncodeSession:
    """An encode stream's WebSocket side: PCM at any rate in (resampled to the codec's), token
    messages out, each preceded by the scales of the segments it completes (codes that carry
    them)."""

    def __init__(self, engine, name: str, codec, start: dict, sample_format: str):
        rate = start.get("sample_rate", codec.input_rate)
        if not isinstance(rate, int) or not 1000 <= rate <= 384000:
            raise Close(1007, f"sample_rate must be an integer in 1000..384000, got {rate!r}")
        token_format = start.get("token_format", "json")
        if token_format not in ("json", "binary"):
            raise Close(1007, f"token_format must be json or binary, got {token_format!r}")
        channels = start.get("channels", codec.channels)
        if not isinstance(channels, int) or isinstance(channels, bool) or \
                channels not in (1, codec.channels):
            raise Close(1007, f"channels must be {' or '.join(map(str, {1, codec.channels}))}, "
                              f"got {channels!r}")
        self.codec, self.sample_format = codec, sample_format
        self.channels, self.token_format = channels, token_format
        self.stream = engine.open_encode_stream(name)
        self.resampler = None
        if rate != codec.input_rate:
            import soxr

            self.resampler = soxr.ResampleStream(rate, codec.input_rate, channels,
                                                 dtype="float32", quality="HQ")
        self.sent_scales = 0
        self.facts = {"stream": self.stream.id, "input_sample_rate": rate,
                      "input_channels": channels, "token_format": token_format}

    def _push(self, x) -> None:
        """Interleaved samples [n * channels], resampled to the codec's rate."""
        x = interleaved(x, self.channels)
        if self.resampler is not None:
            x = self.resampler.resample_chunk(np.ascontiguousarray(x.T)).T \
                if self.channels > 1 else self.resampler.resample_chunk(x)
        self.stream.push(x)

    def read_input(self, data) -> bool:
        if isinstance(data, bytes):
            self._push(pcm_samples(data, self.sample_format))
            return True
        _json(data, ("end",))
        if self.resampler is not None:
            channels = self.channels
            rest = self.resampler.resample_chunk(
                np.zeros((0, channels) if channels > 1 else 0, np.float32), last=True)
            self.stream.push(rest.T if channels > 1 else rest)
        return False

    async def write_output(self, ws, tokens) -> None:
        if self.codec.streaming.scales:  # the scales of the segments these tokens complete
            scales = self.stream.scales()
            if scales.shape[0] > self.sent_scales:
                await ws.send_text(json.dumps({"type": "scales", "first": self.sent_scales,
                                               "scales": scales[self.sent_scales:].tolist()}))
                self.sent_scales = scales.shape[0]
        if self.token_format == "binary":
            await ws.send_bytes(tokens_to_binary(tokens))
        else:
            await ws.send_text(json.dumps({"type": "tokens", "tokens": tokens.tolist()}))

    def summary(self) -> dict:
        return {}


def _id_reader(start: dict, codec) -> IdReader | None:
    """The start message's "ids" scheme as an IdReader (None: tokens come as tokens)."""
    name = start.get("ids")
    if name is None:
        return None
    if not isinstance(name, str):
        raise Close(1007, f"ids must be a scheme name, got {name!r}")
    offset = start.get("ids_offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise Close(1007, f"ids_offset must be a non-negative integer, got {offset!r}")
    try:
        scheme = scheme_for(name, codec.codebook_sizes, **({"offset": offset}
                                                           if name == "generic" else {}))
        reader = IdReader(scheme)
    except TokenIdError as e:
        raise Close(1007, str(e)) from None
    return reader


def _read_ids(data, reader: IdReader, stream) -> bool:
    """Feed one ids message to the reader and its whole frames to the stream; False at the end
    of input (an "end" message or the scheme's end of speech)."""
    if isinstance(data, bytes):
        tokens = reader.feed_ids(ids_from_binary(data))
    else:
        doc = _json(data, ("ids", "text", "end"))
        if doc["type"] == "end":
            reader.finish()
            return False
        if doc["type"] == "ids":
            tokens = reader.feed_ids(ids_from_json(doc.get("ids")))
        else:
            tokens = reader.feed_text(doc.get("text"))
    if tokens.shape[1]:
        stream.push(tokens)
    if reader.ended:
        reader.finish()
        return False
    return True


async def _pump(ws, state, stream, read_input, write_output) -> None:
    """Input to the engine and its output back, concurrently, until the output ends."""

    async def reader():
        while True:
            data = await _receive(ws, state, state.settings.idle_timeout)
            if data is None:  # the client went away: its slot is freed now
                stream.abort()
                return
            if not read_input(data):
                stream.finish()
                return

    async def writer():
        async for out in stream:
            await write_output(ws, out)

    read_task = asyncio.create_task(reader())
    write_task = asyncio.create_task(writer())
    try:
        done, _ = await asyncio.wait({read_task, write_task},
                                     return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if t.exception() is not None:
                raise t.exception()
        await write_task  # the reader is done (end or gone): the rest of the output
        await read_task
    finally:
        for t in (read_task, write_task):
            t.cancel()
        stream.abort()  # no-op once the stream has ended


async def stream_decode_ws(ws, state) -> None:
    await _session(ws, state, "decode")


async def stream_encode_ws(ws, state) -> None:
    await _session(ws, state, "encode")
