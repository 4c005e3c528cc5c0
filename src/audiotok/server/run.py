"""Run the app with uvicorn; SIGTERM (or Ctrl-C) drains before the process exits.

Draining: /readyz answers 503 at once (a load balancer stops sending work), new requests get
503 and new WebSocket streams close 1013, while open streams and requests run to their end (up
to `drain_timeout`); then the server stops and the process exits 0. A second Ctrl-C stops at
once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .app import ServerSettings, create_app

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("audiotok.server")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(engine: Engine | Callable[[], Engine], settings: ServerSettings,
          host: str = "127.0.0.1", port: int = 8000, log_level: str = "info", ready=None,
          warmup: bool = True, warmed=None) -> str | None:
    """Serve until SIGTERM/SIGINT, drain, close the engine. `engine` may be a function that
    builds it (loads the models): it then runs in a thread once the socket listens, so /healthz
    answers at once while requests wait for the models. `ready(port)` is called once the socket
    listens (port 0 picks a free one); then, with `warmup`, the engine warms up while it serves
    (engine.start_warmup; `warmed(model, progress)` as each model is done). Returns None, or why
    the models failed to load (the server then stops at once)."""
    import uvicorn

    app = create_app(engine if not callable(engine) else None, settings)
    state = app.state.audiotok
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off",
                            ws_max_size=settings.max_message_bytes,
                            timeout_graceful_shutdown=max(1, int(settings.drain_timeout)))
    server = None
    loader: list = []  # the loading thread, and the engine it built

    def start(loop) -> None:
        if state.engine is not None:
            if warmup:
                state.engine.start_warmup(warmed)
            return

        def load() -> None:
            try:
                built = engine()
            except Exception as e:  # noqa: BLE001 - returned, and the server stops
                message = " ".join(str(e).split()) or type(e).__name__
                state.load_error = message
                _on_loop(loop, state.attach, None, message)
                server.should_exit = True
                return
            gc.collect()
            gc.freeze()  # the loaded models and libraries: no full collection walks them again
            loader.append(built)
            if warmup:  # planned before the engine is seen: /readyz waits for it
                built.start_warmup(warmed)
            _on_loop(loop, state.attach, built)

        thread = threading.Thread(target=load, name="audiotok-load", daemon=True)
        loader.append(thread)
        thread.start()

    def listening(bound: int, loop) -> None:
        if ready is not None:
            ready(bound)
        start(loop)

    server = _draining_server(config, state, listening)
    gc.collect()
    gc.freeze()
    server.run()
    if loader:  # stopped while loading: let the load finish (the interpreter must not end
        loader[0].join()  # under a thread inside torch), then close what it built
    engine = state.engine or (loader[1] if len(loader) > 1 else None)
    if engine is not None:
        engine.close(timeout=5)
    return state.load_error


def _on_loop(loop, fn, *args) -> None:
    """fn(*args) on the server's loop, unless the server has already stopped."""
    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(fn, *args)


def _draining_server(config, state, ready):
    """A uvicorn.Server whose first exit signal drains instead of stopping at once."""
    import uvicorn

    class Server(uvicorn.Server):
        loop: asyncio.AbstractEventLoop | None = None

        def handle_exit(self, sig, frame):
            # not recorded in _captured_signals: uvicorn would re-raise it, and the process
            # would end by the signal instead of exiting 0
            if state.draining or self.loop is None:
                self.should_exit = True
                if sig == signal.SIGINT and state.draining:
                    self.force_exit = True
                return
            state.draining = True
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self.drain()))

        async def drain(self):
            deadline = time.monotonic() + state.settings.drain_timeout
            engine = state.engine
            log.warning("audiotok: draining (%s)", engine.load() if engine else "loading")
            while time.monotonic() < deadline:
                load = state.engine.load() if state.engine is not None else {}
                busy = any(m["streams"] or m["queued_requests"] for m in load.values())
                if not busy and state.inflight == 0 and state.websockets == 0:
                    break
                await asyncio.sleep(0.05)
            self.should_exit = True

        async def startup(self, sockets=None):
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets)
            if ready is not None and self.servers:
                ready(self.servers[0].sockets[0].getsockname()[1], self.loop)

    return Server(config)
