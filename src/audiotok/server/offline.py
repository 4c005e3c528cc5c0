"""The offline routes: POST /v1/encode (audio in, tokens out) and /v1/decode (tokens in, audio
out, or streamed as decoded for a causal codec); the engine batches concurrent requests."""

from __future__ import annotations

import asyncio
import io
import time
from typing import TYPE_CHECKING

import numpy as np
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .._version import __version__
from ..audio import to_items, write_audio_bytes
from ..codes import Codes, codes_to_bytes
from ..errors import AudiotokError
from ..streaming.spec import LAYERS
from .errors import HTTPError
from .protocol import (
    check_sample_format,
    codes_from_body,
    interleaved,
    pcm_bytes,
    pcm_samples,
    streaming_wav_header,
)

if TYPE_CHECKING:
    from .engine import Engine

AUDIO_FORMATS = {"wav": ("WAV", "audio/wav"), "flac": ("FLAC", "audio/flac"),
                 "ogg": ("OGG", "audio/ogg")}


def add_offline_routes(app, state) -> None:
    """POST /v1/encode and /v1/decode on `app`, over `state` (app.ServerState)."""

    @app.post("/v1/encode")
    async def encode(request: Request):
        engine, name, codec = await _requested_model(request, state)
        q = request.query_params
        fmt = q.get("format", "json")
        if fmt not in ("json", "npy", "codes"):
            raise HTTPError(400, f"unknown format {fmt!r}; expected json, npy or codes")
        if fmt == "npy" and (codec.streaming.scales or codec.global_tokens):
            what = "segment scales" if codec.streaming.scales else "utterance tokens"
            raise HTTPError(400, f"{codec.title} codes carry {what}, which a .npy file "
                                 "cannot hold; ask for format=json or format=codes")
        item = await _audio_of(request, state, codec)
        length = item.samples.shape[-1]
        seconds = length / codec.input_rate
        start = time.perf_counter()
        tokens = await _engine_call(engine.aencode(name, item.samples.numpy()))
        scales = utterance = None
        if codec.streaming.scales:
            tokens, scales = tokens
        elif codec.global_tokens:
            tokens, utterance = tokens
        elapsed = time.perf_counter() - start
        n_samples = codec.output_samples(length)  # what it decodes to
        headers = {"X-Frames": str(tokens.shape[1]), "X-Num-Samples": str(n_samples),
                   "X-Sample-Rate": str(codec.sample_rate),
                   "X-Encode-Seconds": f"{elapsed:.4f}"}
        if fmt == "npy":
            buf = io.BytesIO()
            np.save(buf, tokens.astype(np.int64))
            return Response(buf.getvalue(), media_type="application/octet-stream",
                            headers=headers)
        if fmt == "codes":
            import torch

            codes = Codes(torch.from_numpy(tokens)[None], torch.tensor([tokens.shape[1]]),
                          codec=codec.name, sample_rate=codec.sample_rate,
                          samples_per_frame=codec.samples_per_frame,
                          num_samples=torch.tensor([n_samples]),
                          scales=None if scales is None else torch.from_numpy(scales)[None],
                          globals=None if utterance is None else
                          torch.from_numpy(utterance)[None],
                          meta={"codec_version": __version__, "model": codec.title,
                                "source_sample_rate": [item.source_rate],
                                "source_num_samples": [item.source_samples]})
            return Response(codes_to_bytes(codes), media_type="application/octet-stream",
                            headers=headers)
        extra = {} if scales is None else {"scales": scales.tolist()}
        if utterance is not None:
            extra["globals"] = utterance.tolist()
        return JSONResponse({"model": name, "codec": codec.name, "tokens": tokens.tolist(),
                             **extra, "frames": tokens.shape[1], "num_samples": n_samples,
                             "sample_rate": codec.sample_rate, "seconds": seconds,
                             "source_sample_rate": item.source_rate,
                             "encode_seconds": elapsed}, headers=headers)

    @app.post("/v1/decode")
    async def decode(request: Request):
        engine = await state.get_engine()
        q = request.query_params
        body = await _read_body(request, state.settings.max_body_bytes)
        tokens, num_samples, doc = await asyncio.to_thread(
            codes_from_body, body, request.headers.get("content-type", ""))
        name = model_name(engine, q.get("model") or doc.get("model"))
        codec = engine.models[name].codec
        if doc.get("codec") and doc["codec"] != codec.name:
            raise HTTPError(400, f"these codes were made by the {doc['codec']!r} codec; model "
                                 f"{name!r} is {codec.name!r}")
        fmt = q.get("format", doc.get("format", "wav"))
        sample_format = check_sample_format(q.get("sample_format",
                                                  doc.get("sample_format", "s16le")))
        clamp = _flag(q.get("clamp", doc.get("clamp", False)))
        stream = _flag(q.get("stream", doc.get("stream", False)))
        if fmt not in (*AUDIO_FORMATS, "pcm", "npz"):
            raise HTTPError(400, f"unknown format {fmt!r}; expected wav, flac, ogg, pcm or npz")
        if tokens.shape[0] != 1 and fmt != "npz":
            raise HTTPError(400, f"{tokens.shape[0]} items: a batch decodes to format=npz")
        if stream:
            if codec.streaming.decode != LAYERS:
                raise HTTPError(400, f"model {name!r} ({codec.title}) is not causal: streamed "
                                     "decoding needs a causal codec; use the WebSocket "
                                     "stream for windowed decoding")
            if fmt not in ("wav", "pcm"):
                raise HTTPError(400, "a streamed decode answers format=wav or format=pcm")
            s = engine.open_decode_stream(name, clamp=clamp)
            try:
                s.push(tokens[0])
                s.finish()
            except BaseException:
                s.abort()
                raise
            limit = None if num_samples is None else int(num_samples[0])
            return StreamingResponse(
                _stream_audio(s, fmt, sample_format, codec.sample_rate, limit),
                media_type="audio/wav" if fmt == "wav" else "application/octet-stream",
                headers=_pcm_headers(codec, sample_format))
        scales = _item_rows(doc.get("scales"), tokens.shape[0], "scales", "segments")
        utterance = _item_rows(doc.get("globals"), tokens.shape[0], "globals",
                               "utterance tokens")
        voice = q.get("voice", doc.get("voice"))
        start = time.perf_counter()
        futures = [engine.decode(name, tokens[i],
                                 num_samples=None if num_samples is None else
                                 int(num_samples[i]), clamp=clamp, scales=scales[i],
                                 voice=None if voice is None else str(voice),
                                 globals=utterance[i])
                   for i in range(tokens.shape[0])]
        audio = [await _engine_call(asyncio.wrap_future(f)) for f in futures]
        headers = {**_pcm_headers(codec, sample_format),
                   "X-Decode-Seconds": f"{time.perf_counter() - start:.4f}",
                   "X-Num-Samples": ",".join(str(a.shape[-1]) for a in audio)}
        if fmt == "npz":  # audio [B, N] (mono) or [B, C, N]
            buf = io.BytesIO()
            n = max(a.shape[-1] for a in audio)
            padded = np.zeros((len(audio), *audio[0].shape[:-1], n), np.float32)
            for i, a in enumerate(audio):
                padded[i, ..., : a.shape[-1]] = a
            np.savez(buf, audio=padded, num_samples=np.array([a.shape[-1] for a in audio]),
                     sample_rate=np.array(codec.sample_rate))
            return Response(buf.getvalue(), media_type="application/octet-stream",
                            headers=headers)
        if fmt == "pcm":
            return Response(pcm_bytes(audio[0], sample_format),
                            media_type="application/octet-stream", headers=headers)
        kind, media = AUDIO_FORMATS[fmt]
        data = await asyncio.to_thread(write_audio_bytes, audio[0].T, codec.sample_rate, kind,
                                       "PCM_16" if kind != "OGG" else None)
        return Response(data, media_type=media, headers=headers)


def add_voice_routes(app, state) -> None:
    """POST /v1/voices (prompt speech in, a voice id out), GET /v1/voices, DELETE
    /v1/voices/{id}: the voices the engine keeps for models that decode in one."""

    @app.post("/v1/voices")
    async def add_voice(request: Request):
        engine, name, codec = await _requested_model(request, state)
        item = await _audio_of(request, state, codec)
        stored = await _engine_call(asyncio.to_thread(
            engine.voices.add, name, codec, item.samples.numpy(), codec.input_rate))
        return stored.facts()

    @app.get("/v1/voices")
    async def list_voices():
        engine = await state.get_engine()
        return {"voices": engine.voices.list()}

    @app.delete("/v1/voices/{voice_id}")
    async def delete_voice(voice_id: str):
        engine = await state.get_engine()
        return {"deleted": engine.voices.remove(voice_id).id}


def _flag(value) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true", "yes", "on")


def model_name(engine: Engine, name: str | None) -> str:
    if name is None:
        if len(engine.models) == 1:
            return next(iter(engine.models))
        raise HTTPError(400, f"several models are loaded; choose one with model= "
                             f"({', '.join(engine.models)})")
    if name not in engine.models:
        raise HTTPError(404, f"unknown model {name!r}; loaded: {', '.join(engine.models)}")
    return name


async def _requested_model(request, state):
    """(engine, name, codec) of the model a request's ?model= names (the only one if none)."""
    engine = await state.get_engine()
    name = model_name(engine, request.query_params.get("model"))
    return engine, name, engine.models[name].codec


async def _audio_of(request, state, codec):
    """The request body's audio (a file, or raw PCM with ?pcm=) as an item at the codec's input
    rate and channels."""
    body = await _read_body(request, state.settings.max_body_bytes)
    if not body:
        raise HTTPError(400, "empty body: send an audio file, or raw PCM with ?pcm=")
    return await asyncio.to_thread(_audio_item, body, request.query_params, codec.input_rate,
                                   codec.channels)


async def _read_body(request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, f"body over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _audio_item(body: bytes, q, target_rate: int, codec_channels: int = 1):
    """The body's audio at the codec's rate, mono (or for a codec of 2 channels, stereo: a mono
    input on both channels): a file soundfile reads, or raw PCM
    (?pcm=s16le|f32le&sample_rate=R[&channels=C], interleaved)."""
    pcm = q.get("pcm")
    if pcm is None:
        return to_items(body, None, target_rate, channels=codec_channels)[0]
    sample_format = check_sample_format(pcm)
    try:
        rate = int(q.get("sample_rate", ""))
        channels = int(q.get("channels", "1"))
    except ValueError:
        raise HTTPError(400, "raw PCM needs sample_rate=<Hz> (and optionally channels=<n>)"
                        ) from None
    if not 1000 <= rate <= 384000 or not 1 <= channels <= 64:
        raise HTTPError(400, f"sample_rate {rate} or channels {channels} out of range")
    x = interleaved(pcm_samples(body, sample_format), channels)
    import torch

    return to_items(torch.from_numpy(x), rate, target_rate, channels=codec_channels)[0]


async def _engine_call(awaitable):
    try:
        return await awaitable
    except (AudiotokError, HTTPError):
        raise
    except Exception as e:  # noqa: BLE001 - a model error: the request fails, the server goes on
        raise HTTPError(500, f"{type(e).__name__}: {e}") from None


def _item_rows(value, items: int, name: str, what: str) -> list:
    """Each item's row of a body's per-item values (segment scales, utterance tokens; None:
    none given): [S] for one item, or [B, S] (JSON lists of lists, a .codes archive's
    array)."""
    if value is None:
        return [None] * items
    batch = isinstance(value, np.ndarray) and value.ndim == 2 or (
        isinstance(value, list) and bool(value) and isinstance(value[0], list))
    rows = list(value) if batch else [value]
    if len(rows) != items:
        raise HTTPError(400, f"{name} must be [{items}, {what}] for {items} items")
    return rows


def _pcm_headers(codec, sample_format: str) -> dict:
    return {"X-Sample-Rate": str(codec.sample_rate), "X-Channels": str(codec.channels),
            "X-Sample-Format": sample_format}


async def _stream_audio(s, fmt: str, sample_format: str, rate: int, limit: int | None):
    """Chunks of a decode stream as they are decoded (the stream is aborted if the client
    goes away)."""
    written = 0
    try:
        if fmt == "wav":
            yield streaming_wav_header(rate, sample_format)
        async for pcm in s:
            if limit is not None:
                pcm = pcm[..., : max(0, limit - written)]
            written += pcm.shape[-1]
            if pcm.size:
                yield pcm_bytes(pcm, sample_format)
    finally:
        s.abort()
