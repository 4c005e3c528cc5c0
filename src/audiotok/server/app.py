"""The HTTP and WebSocket app over an Engine (FastAPI; `pip install 'audiotok[serve]'`).

Routes (README, Serving, has the protocol with examples):
    GET  /healthz (alive), /readyz (warmed up; 503 with the progress until then), /metrics,
         /v1/models
    POST /v1/encode   audio file or raw PCM in -> tokens (JSON, .npy or .codes)
    POST /v1/decode   tokens (JSON, .npy or .codes) in -> WAV, FLAC, OGG, raw PCM or npz
                      (causal codecs: optionally streamed as decoded)
    WS   /v1/stream/decode, /v1/stream/encode
Every bad request gets a 4xx with {"error": message}; the engine and other clients go on.
"""

from __future__ import annotations

import asyncio
import hmac
import io
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .._version import __version__
from ..audio import to_items, write_audio_bytes
from ..codes import Codes, codes_to_bytes
from ..errors import AudiotokError
from .errors import EngineBusy, StreamClosed
from .metrics import metrics_text
from .page import mount_page
from .protocol import (
    check_sample_format,
    codes_from_body,
    pcm_bytes,
    pcm_samples,
    streaming_wav_header,
)
from .websocket import stream_decode_ws, stream_encode_ws

if TYPE_CHECKING:
    from .engine import Engine

AUDIO_FORMATS = {"wav": ("WAV", "audio/wav"), "flac": ("FLAC", "audio/flac"),
                 "ogg": ("OGG", "audio/ogg")}


@dataclass(frozen=True)
class ServerSettings:
    api_key: str | None = None  # required on every route but /healthz, /readyz and / if set
    max_body_bytes: int = 64 * 1024 * 1024  # HTTP bodies (413 beyond)
    max_message_bytes: int = 1024 * 1024  # one WebSocket message
    idle_timeout: float = 30.0  # a WebSocket stream with no message for this long is closed
    drain_timeout: float = 30.0  # on SIGTERM, open work gets this long to finish


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ServerState:
    """What the routes share: the engine (None while the models load), draining, requests in
    flight, counters."""

    def __init__(self, engine: Engine | None, settings: ServerSettings):
        self.engine = engine
        self.load_error: str | None = None
        self._loaded = asyncio.Event()  # bound to the server's loop on first use
        if engine is not None:
            self._loaded.set()
        self.settings = settings
        self.draining = False
        self.inflight = 0
        self.websockets = 0
        self.requests: dict[tuple[str, int], int] = {}

    def attach(self, engine: Engine | None, error: str | None = None) -> None:
        """The loaded engine, or why loading failed (call on the server's loop)."""
        self.engine, self.load_error = engine, error
        self._loaded.set()

    async def get_engine(self) -> Engine:
        """The engine; a request that arrives while the models load waits for them."""
        if self.engine is None:
            await self._loaded.wait()
        if self.engine is None:
            raise HTTPError(503, f"the models failed to load: {self.load_error}")
        return self.engine

    def authorized(self, headers, query) -> bool:
        key = self.settings.api_key
        if key is None:
            return True
        given = query.get("api_key") or headers.get("x-api-key") or ""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return hmac.compare_digest(given.encode(), key.encode())


def create_app(engine: Engine | None, settings: ServerSettings | None = None):
    """A FastAPI app serving `engine`. The caller owns the engine (and closes it). With None, the
    app answers /healthz at once and waits for `app.state.audiotok.attach(engine)` (run.py loads
    the models after the server listens)."""
    settings = settings or ServerSettings()
    state = ServerState(engine, settings)
    app = FastAPI(title="audiotok", version=__version__, docs_url=None, redoc_url=None)
    app.state.audiotok = state

    open_paths = {"/healthz", "/readyz", "/", "/page/index.html", "/page/app.js",
                  "/page/style.css"}

    @app.middleware("http")
    async def guard(request: Request, call_next):
        path = request.url.path
        try:
            if path not in open_paths and not state.authorized(request.headers,
                                                               request.query_params):
                raise HTTPError(401, "missing or wrong API key (Authorization: Bearer KEY)")
            if state.draining and path not in open_paths and path != "/metrics":
                raise HTTPError(503, "the server is shutting down")
            length = request.headers.get("content-length")
            if length is not None and length.isdigit() and \
                    int(length) > settings.max_body_bytes:
                raise HTTPError(413, f"body of {int(length)} bytes is over the limit of "
                                     f"{settings.max_body_bytes}")
        except HTTPError as e:
            return _count(state, path, JSONResponse({"error": str(e)}, e.status))
        state.inflight += 1
        try:
            response = await call_next(request)
        finally:
            state.inflight -= 1
        return _count(state, path, response)

    @app.exception_handler(HTTPError)
    async def http_error(request, e: HTTPError):
        return JSONResponse({"error": str(e)}, e.status)

    @app.exception_handler(AudiotokError)
    async def audiotok_error(request, e: AudiotokError):
        return JSONResponse({"error": str(e)}, _status(e))

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz():
        if state.draining:
            return JSONResponse({"ready": False, "reason": "shutting down"}, 503)
        engine = state.engine
        if engine is None:
            reason = ("loading the models" if state.load_error is None
                      else f"the models failed to load: {state.load_error}")
            return JSONResponse({"ready": False, "reason": reason}, 503)
        warmup = engine.warmup_status()
        if not engine.ready():  # requests are served meanwhile; their first calls may be slower
            return JSONResponse({"ready": False, "reason": "warming up", "warmup": warmup}, 503)
        return {"ready": True, "warmup": warmup}

    @app.get("/metrics")
    async def metrics():
        text, content_type = metrics_text(state)
        return Response(text, media_type=content_type)

    @app.get("/v1/models")
    async def models():
        engine = await state.get_engine()
        return {"models": [_model_facts(name, m.codec) for name, m in engine.models.items()]}

    @app.post("/v1/encode")
    async def encode(request: Request):
        engine = await state.get_engine()
        q = request.query_params
        name = _model_name(engine, q.get("model"))
        codec = engine.models[name].codec
        fmt = q.get("format", "json")
        if fmt not in ("json", "npy", "codes"):
            raise HTTPError(400, f"unknown format {fmt!r}; expected json, npy or codes")
        body = await _read_body(request, settings.max_body_bytes)
        if not body:
            raise HTTPError(400, "empty body: send an audio file, or raw PCM with ?pcm=")
        item = await asyncio.to_thread(_audio_item, body, q, codec.sample_rate)
        seconds = item.samples.numel() / codec.sample_rate
        start = time.perf_counter()
        tokens = await _engine_call(engine.aencode(name, item.samples.numpy()))
        elapsed = time.perf_counter() - start
        n_samples = item.samples.numel()
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
                          meta={"codec_version": __version__, "model": codec.title,
                                "source_sample_rate": [item.source_rate],
                                "source_num_samples": [item.source_samples]})
            return Response(codes_to_bytes(codes), media_type="application/octet-stream",
                            headers=headers)
        return JSONResponse({"model": name, "codec": codec.name, "tokens": tokens.tolist(),
                             "frames": tokens.shape[1], "num_samples": n_samples,
                             "sample_rate": codec.sample_rate, "seconds": seconds,
                             "source_sample_rate": item.source_rate,
                             "encode_seconds": elapsed}, headers=headers)

    @app.post("/v1/decode")
    async def decode(request: Request):
        engine = await state.get_engine()
        q = request.query_params
        body = await _read_body(request, settings.max_body_bytes)
        tokens, num_samples, doc = await asyncio.to_thread(
            codes_from_body, body, request.headers.get("content-type", ""))
        name = _model_name(engine, q.get("model") or doc.get("model"))
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
            if not codec.causal:
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
        start = time.perf_counter()
        futures = [engine.decode(name, tokens[i],
                                 num_samples=None if num_samples is None else
                                 int(num_samples[i]), clamp=clamp)
                   for i in range(tokens.shape[0])]
        audio = [await _engine_call(asyncio.wrap_future(f)) for f in futures]
        headers = {**_pcm_headers(codec, sample_format),
                   "X-Decode-Seconds": f"{time.perf_counter() - start:.4f}",
                   "X-Num-Samples": ",".join(str(a.shape[0]) for a in audio)}
        if fmt == "npz":
            buf = io.BytesIO()
            n = max(a.shape[0] for a in audio)
            padded = np.zeros((len(audio), n), np.float32)
            for i, a in enumerate(audio):
                padded[i, : a.shape[0]] = a
            np.savez(buf, audio=padded, num_samples=np.array([a.shape[0] for a in audio]),
                     sample_rate=np.array(codec.sample_rate))
            return Response(buf.getvalue(), media_type="application/octet-stream",
                            headers=headers)
        if fmt == "pcm":
            return Response(pcm_bytes(audio[0], sample_format),
                            media_type="application/octet-stream", headers=headers)
        kind, media = AUDIO_FORMATS[fmt]
        data = await asyncio.to_thread(write_audio_bytes, audio[0], codec.sample_rate, kind,
                                       "PCM_16" if kind != "OGG" else None)
        return Response(data, media_type=media, headers=headers)

    @app.websocket("/v1/stream/decode")
    async def ws_decode(websocket: WebSocket):
        await stream_decode_ws(websocket, state)

    @app.websocket("/v1/stream/encode")
    async def ws_encode(websocket: WebSocket):
        await stream_encode_ws(websocket, state)

    mount_page(app, state)
    return app


def _count(state: ServerState, path: str, response):
    key = (path if path.startswith("/v1/") or path in ("/healthz", "/readyz", "/metrics")
           else "other", response.status_code)
    state.requests[key] = state.requests.get(key, 0) + 1
    return response


def _status(e: AudiotokError) -> int:
    if isinstance(e, EngineBusy):
        return 429
    if isinstance(e, StreamClosed):
        return 503
    if isinstance(e, HTTPError):
        return e.status
    return 400


def _flag(value) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true", "yes", "on")


def _model_name(engine: Engine, name: str | None) -> str:
    if name is None:
        if len(engine.models) == 1:
            return next(iter(engine.models))
        raise HTTPError(400, f"several models are loaded; choose one with model= "
                             f"({', '.join(engine.models)})")
    if name not in engine.models:
        raise HTTPError(404, f"unknown model {name!r}; loaded: {', '.join(engine.models)}")
    return name


def _model_facts(name: str, codec) -> dict:
    return {"name": name, **codec.info(), "streaming": {
        "decode": "exact" if codec.causal else "windowed", "encode": codec.causal}}


async def _read_body(request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, f"body over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _audio_item(body: bytes, q, target_rate: int):
    """The body's audio, mono at the codec's rate: a file soundfile reads, or raw PCM
    (?pcm=s16le|f32le&sample_rate=R[&channels=C], interleaved)."""
    pcm = q.get("pcm")
    if pcm is None:
        return to_items(body, None, target_rate)[0]
    sample_format = check_sample_format(pcm)
    try:
        rate = int(q.get("sample_rate", ""))
        channels = int(q.get("channels", "1"))
    except ValueError:
        raise HTTPError(400, "raw PCM needs sample_rate=<Hz> (and optionally channels=<n>)"
                        ) from None
    if not 1000 <= rate <= 384000 or not 1 <= channels <= 64:
        raise HTTPError(400, f"sample_rate {rate} or channels {channels} out of range")
    x = pcm_samples(body, sample_format)
    if x.size % channels:
        raise HTTPError(400, f"{x.size} samples do not split into {channels} channels")
    x = x.reshape(-1, channels).T
    import torch

    return to_items(torch.from_numpy(np.ascontiguousarray(x)), rate, target_rate)[0]


async def _engine_call(awaitable):
    try:
        return await awaitable
    except AudiotokError:
        raise
    except Exception as e:  # noqa: BLE001 - a model error: the request fails, the server goes on
        raise HTTPError(500, f"{type(e).__name__}: {e}") from None


def _pcm_headers(codec, sample_format: str) -> dict:
    return {"X-Sample-Rate": str(codec.sample_rate), "X-Channels": "1",
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
                pcm = pcm[: max(0, limit - written)]
            written += pcm.shape[0]
            if pcm.size:
                yield pcm_bytes(pcm, sample_format)
    finally:
        s.abort()


def json_message(**kw) -> str:
    return json.dumps(kw)
