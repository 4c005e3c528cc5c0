"""`audiotok serve`: the HTTP/WebSocket server over the serving engine."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import AudiotokError
from ..hub import model_label
from ..models import split_spec
from .common import (
    DEFAULT_MODEL,
    DTYPE_NAMES,
    device_option,
    fail,
    one_line,
    set_threads,
    threads_option,
)


def served_name(spec: str) -> tuple[str, str]:
    """(name, model) of a --model value: NAME=PATH, a hub name, or a path (named after the file,
    or its folder when the file name says nothing: codec.pth -> its folder's name)."""
    if "=" in spec:
        name, model = spec.split("=", 1)
        if not name or not model:
            raise click.BadParameter(f"expected NAME=PATH, got {spec!r}", param_hint="--model")
        return name, str(Path(model).resolve()) if Path(model).exists() else model
    path = Path(spec)
    if path.exists():
        return model_label(spec), str(path.resolve())
    name, _ = split_spec(spec)  # NAME?option=value: served as NAME
    return model_label(str(name)), spec


@click.command()
@click.option("--model", "-m", "models", multiple=True, default=[DEFAULT_MODEL],
              show_default=True,
              help="Model to serve: a hub name, a path, or NAME=PATH; repeat for several. "
                   "Requests choose a model by its name.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback without --api-key is warned about.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@device_option
@click.option("--dtype", type=click.Choice(list(DTYPE_NAMES)), default="float32", show_default=True)
@threads_option
@click.option("--max-streams", type=click.IntRange(min=1), default=64, show_default=True,
              help="Open streams per model (batch slots); beyond: 429 / close 1013.")
@click.option("--max-batch", type=click.IntRange(min=1), default=16, show_default=True,
              help="Streams per engine step (1: no batching, one stream per step).")
@click.option("--max-step-frames", type=click.IntRange(min=1), default=8, show_default=True,
              help="Frames one stream contributes to a step.")
@click.option("--batch-wait-ms", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Offline requests arriving within this window run as one batch.")
@click.option("--step-wait-ms", type=click.FloatRange(min=0), default=20.0, show_default=True,
              help="A stream step waits this long at most for other streams' frames (fewer, "
                   "larger steps), unless a stream waits for its first audio.")
@click.option("--api-key", default=lambda: os.environ.get("AUDIOTOK_API_KEY"),
              help="Require this key (Authorization: Bearer KEY, X-API-Key, or ?api_key= on "
                   "WebSockets). Default: $AUDIOTOK_API_KEY.")
@click.option("--max-body-mb", type=click.FloatRange(min=0.001), default=64.0,
              show_default=True, help="Largest HTTP body (413 beyond).")
@click.option("--max-request-seconds", type=click.FloatRange(min=0.001), default=600.0,
              show_default=True, help="Longest audio one offline request may carry.")
@click.option("--max-voices", type=click.IntRange(min=1), default=32, show_default=True,
              help="Voices kept for models that decode in one (POST /v1/voices; 429 beyond).")
@click.option("--max-voice-seconds", type=click.FloatRange(min=0.1), default=30.0,
              show_default=True, help="Longest prompt speech a voice is made from.")
@click.option("--idle-timeout", type=click.FloatRange(min=0.1), default=30.0,
              show_default=True, help="Close a WebSocket stream idle this long (seconds).")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=30.0,
              show_default=True, help="On SIGTERM, time given to open work (seconds).")
@click.option("--window", default=None,
              help="Non-causal codecs' stream decoding: left,chunk,lookahead frames (default: "
                   "each codec's measured setting, e.g. 10,25,10).")
@click.option("--ray", "on_ray", is_flag=True,
              help="Run on Ray Serve: one engine per replica behind Ray's proxy "
                   "(needs audiotok[ray]).")
@click.option("--replicas", type=click.IntRange(min=1), default=None,
              help="With --ray: replicas (default: one per GPU on CUDA, else 1).")
@click.option("--ray-address", default=None,
              help="With --ray: the cluster to join (default: start a local instance).")
@click.option("--cuda-graphs", is_flag=True,
              help="On CUDA: replay offline batches and stream steps (streams and frames "
                   "padded to 1, 2, 4 ... 256) as CUDA graphs. Ignored on other devices.")
@click.option("--no-warmup", is_flag=True,
              help="Skip the warm-up: /readyz answers 200 once the models are loaded. Without "
                   "it every batch size and frame count runs once (batch 1 first) while the "
                   "server already serves, and /readyz answers 200 when that is done.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(models, host, port, device, dtype, threads, max_streams, max_batch,
          max_step_frames, batch_wait_ms, step_wait_ms, api_key, max_body_mb, max_request_seconds,
          max_voices, max_voice_seconds, idle_timeout, drain_timeout, window, on_ray, replicas,
          ray_address, cuda_graphs, no_warmup, log_level):
    """Serve loaded codecs over HTTP and WebSocket (needs `pip install 'audiotok[serve]'`)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        fail("the server needs FastAPI and uvicorn: pip install 'audiotok[serve]'")
        sys.exit(1)
    from ..server import EngineSettings, WindowSettings
    from ..server.app import ServerSettings
    from ..server.run import is_loopback
    from ..server.run import serve as run

    try:
        windows = None
        if window is not None:
            left, chunk, look = (int(v) for v in window.split(","))
            windows = WindowSettings(left, chunk, look)
    except ValueError as e:
        raise click.BadParameter(f"expected left,chunk,lookahead frames: {e}",
                                 param_hint="--window") from None
    named = [served_name(spec) for spec in models]
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise click.BadParameter(f"two models have one name ({', '.join(names)}); name them "
                                 "with NAME=PATH", param_hint="--model")
    if not is_loopback(host) and not api_key:
        click.echo(f"audiotok: warning: serving on {host} without --api-key: anyone who can "
                   "reach this address can use the server", err=True)
    engine_settings = EngineSettings(
        max_streams=max_streams, max_batch=max_batch, max_step_frames=max_step_frames,
        batch_wait_ms=batch_wait_ms, step_wait_ms=step_wait_ms,
        max_request_seconds=max_request_seconds, max_voices=max_voices,
        max_voice_seconds=max_voice_seconds, window=windows)
    settings = ServerSettings(api_key=api_key, max_body_bytes=int(max_body_mb * 1024 * 1024),
                              idle_timeout=idle_timeout, drain_timeout=drain_timeout)
    if on_ray:
        _serve_on_ray(named, device, dtype, threads, engine_settings, settings, host, port,
                      replicas, ray_address, not no_warmup, cuda_graphs)
        return
    try:  # what can be checked without loading: names, paths, which codec each path holds
        for _, model in named:
            check_model(model)
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(1)

    def load_engine():
        """Runs once the server listens (run.serve): torch, the models, the engine."""
        from .. import load
        from ..server import Engine

        set_threads(threads)
        codecs = {name: load(model, device=device, dtype=dtype, cuda_graphs=cuda_graphs)
                  for name, model in named}
        return Engine(codecs, engine_settings)

    def ready(bound: int) -> None:
        click.echo(f"audiotok: serving {', '.join(names)} on http://{host}:{bound}"
                   + " (loading the models" + ("" if no_warmup else ", then warming up")
                   + "; /readyz answers 200 when ready)",
                   err=True)

    def warmed(model: str, m) -> None:
        click.echo(f"audiotok: warmed up {model}: {m.done} step shapes in "
                   f"{m.finished - m.started:.1f} s ({m.seconds:.1f} s of compute; batch 1 "
                   f"after {m.first_at - m.started:.1f} s)", err=True)

    error = run(load_engine, settings, host, port, log_level, ready, warmup=not no_warmup,
                warmed=warmed)
    if error is not None:
        fail(error)
        sys.exit(1)


def check_model(model: str) -> None:
    """A known name, or a path whose codec family is recognised (no torch, no weights read)."""
    from ..models.registry import PRESETS, detect_family, unknown_name

    if Path(model).exists():
        detect_family(Path(model))
    elif model not in PRESETS:
        raise unknown_name(model)


def _serve_on_ray(named, device, dtype, threads, engine_settings, settings, host, port,
                  replicas, ray_address, warmup, cuda_graphs) -> None:
    try:
        import ray  # noqa: F401
        from ray import serve  # noqa: F401
    except ImportError:
        fail("--ray needs Ray Serve: pip install 'audiotok[ray]'")
        sys.exit(1)
    from ..server.ray_serve import serve_on_ray

    if port == 0:  # Ray's proxy needs a port number up front
        import socket

        with socket.socket() as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
    names = ", ".join(n for n, _ in named)

    def ready(bound: int, count: int) -> None:
        click.echo(f"audiotok: serving {names} on http://{host}:{bound} (Ray Serve, {count} "
                   "replicas)", err=True)

    serve_on_ray(named, device=device, dtype=dtype, threads=threads,
                 engine_settings=engine_settings, server_settings=settings, host=host,
                 port=port, replicas=replicas, ray_address=ray_address, warmup=warmup,
                 cuda_graphs=cuda_graphs, ready=ready)
