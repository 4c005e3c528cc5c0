"""The HTTP and WebSocket app over an Engine (FastAPI; `pip install 'audiotok[serve]'`).

Routes (README, Serving, has the protocol with examples):
    GET  /healthz (alive), /readyz (warmed up; 503 with the progress until then), /metrics,
         /v1/models
    POST /v1/encode   audio file or raw PCM in -> tokens (JSON, .npy or .codes)
    POST /v1/decode   tokens (JSON, .npy or .codes) in -> WAV, FLAC, OGG, raw PCM or npz
                      (causal codecs: optionally streamed as decoded; voice=ID for a model
                      that decodes in a voice)
    POST /v1/voices   prompt speech in -> a voice id (GET lists them, DELETE /v1/voices/ID)
    WS   /v1/stream/decode, /v1/stream/encode
Every bad request gets a 4xx with {"error": message}; the engine and other clients go on.
This module has the app, its guard and the status routes; the offline routes are in offline.py,
the WebSocket streams in websocket.py, the demo page in page/.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response

from .._version import __version__
from ..errors import AudiotokError
from .errors import EngineBusy, HTTPError, StreamClosed
from .metrics import metrics_text
from .offline import add_offline_routes, add_voice_routes
from .page import mount_page
from .websocket import stream_decode_ws, stream_encode_ws

if TYPE_CHECKING:
    from .engine import Engine


@dataclass(frozen=True)
class ServerSettings:
    api_key: str | None = None  # required on every route but /healthz, /readyz and / if set
    max_body_bytes: int = 64 * 1024 * 1024  # HTTP bodies (413 beyond)
    max_message_bytes: int = 1024 * 1024  # one WebSocket message
    idle_timeout: float = 30.0  # a WebSocket stream with no message for this long is closed
    drain_timeout: float = 30.0  # on SIGTERM, open work gets this long to finish


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
        return {"models": [_model_facts(name, m) for name, m in engine.models.items()]}

    add_offline_routes(app, state)
    add_voice_routes(app, state)

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


def _model_facts(name: str, served) -> dict:
    decode = served.runners.get("decode")
    return {"name": name, **served.codec.info(), "streaming": {
        "decode": None if decode is None else decode.mode, "encode": "encode" in served.runners}}
