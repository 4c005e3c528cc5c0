"""Run the app with uvicorn; SIGTERM (or Ctrl-C) drains before the process exits.

Draining: /readyz answers 503 at once (a load balancer stops sending work), new requests get
503 and new WebSocket streams close 1013, while open streams and requests run to their end (up
to `drain_timeout`); then the server stops and the process exits 0. A second Ctrl-C stops at
once.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import signal
import time

from .app import ServerSettings, create_app
from .engine import Engine

log = logging.getLogger("audiotok.server")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(engine: Engine, settings: ServerSettings, host: str = "127.0.0.1", port: int = 8000,
          log_level: str = "info", ready=None) -> None:
    """Serve until SIGTERM/SIGINT, drain, close the engine. `ready(port)` is called once the
    socket listens (port 0 picks a free one)."""
    import uvicorn

    app = create_app(engine, settings)
    state = app.state.audiotok
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off",
                            ws_max_size=settings.max_message_bytes,
                            timeout_graceful_shutdown=max(1, int(settings.drain_timeout)))
    server = _draining_server(config, state, ready)
    gc.collect()
    gc.freeze()  # the loaded models and libraries: no full collection walks them again
    server.run()
    engine.close(timeout=5)


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
            log.warning("audiotok: draining (%s)", state.engine.load())
            while time.monotonic() < deadline:
                load = state.engine.load()
                busy = any(m["streams"] or m["queued_requests"] for m in load.values())
                if not busy and state.inflight == 0 and state.websockets == 0:
                    break
                await asyncio.sleep(0.05)
            self.should_exit = True

        async def startup(self, sockets=None):
            self.loop = asyncio.get_running_loop()
            await super().startup(sockets)
            if ready is not None and self.servers:
                ready(self.servers[0].sockets[0].getsockname()[1])

    return Server(config)
