"""`audiotok serve --ray`: the same app on Ray Serve, one engine per replica (`audiotok[ray]`
with `audiotok[serve]`).

Each replica loads the models, runs its own engine and serves the same routes (HTTP, WebSocket,
page); Ray Serve's proxy spreads requests and connections over the replicas (a WebSocket stays
on the replica it opened on). One replica per GPU when the device is CUDA (each takes one GPU),
else `replicas` CPU replicas with `threads` CPUs each.
"""

from __future__ import annotations

import signal
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict

from .app import ServerSettings
from .engine import EngineSettings


class Replica:
    """One Ray Serve replica: models, engine, app (built on the replica by Ray Serve)."""

    def __init__(self, named: list[tuple[str, str]], device: str, dtype: str,
                 threads: int | None, engine_settings: dict, server_settings: dict,
                 warmup: bool, cuda_graphs: bool = False):
        import torch

        from .. import load
        from .engine import Engine
        from .settings import WindowSettings

        if threads:
            torch.set_num_threads(threads)
        if device.startswith("cuda"):
            device = "cuda"  # Ray gives each replica its own GPU, visible as device 0
        codecs = {name: load(model, device=device, dtype=getattr(torch, dtype),
                             cuda_graphs=cuda_graphs) for name, model in named}
        window = engine_settings.pop("window")
        window = None if window is None else WindowSettings(**window)
        self.engine = Engine(codecs, EngineSettings(**engine_settings, window=window))
        if warmup:  # in the engine's worker, while the replica serves
            self.engine.start_warmup()
        self.settings = ServerSettings(**server_settings)

    def __serve_build_asgi_app__(self):
        from .app import create_app

        return create_app(self.engine, self.settings)


# how long the proxy may take to route to the replicas once they run (a cap: the wait ends as
# soon as the proxy answers)
PROXY_READY_SECONDS = 600.0


def serve_on_ray(named: list[tuple[str, str]], *, device: str, dtype: str,
                 threads: int | None, engine_settings: EngineSettings,
                 server_settings: ServerSettings, host: str, port: int, replicas: int | None,
                 ray_address: str | None, warmup: bool, cuda_graphs: bool = False,
                 ready=None) -> None:
    """Deploy `replicas` replicas (default: one per GPU on CUDA, else 1) behind Ray Serve's
    proxy on host:port and block until SIGTERM/SIGINT; then shut Serve down. `ready(port,
    replicas)` is called once the proxy routes requests to the app (serve.run returns when the
    replicas run; the proxy learns their routes after that). cuda_graphs: see `audiotok serve
    --cuda-graphs`."""
    import ray
    from ray import serve

    ray.init(address=ray_address, include_dashboard=False, log_to_driver=False,
             ignore_reinit_error=True)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    on_gpu = device.startswith("cuda")
    if replicas is None:
        replicas = max(1, gpus) if on_gpu else 1
    options = {"num_gpus": 1} if on_gpu else {"num_cpus": threads or 1}
    serve.start(http_options={"host": host, "port": port})
    deployment = serve.deployment(name="audiotok", num_replicas=replicas,
                                  ray_actor_options=options,
                                  max_ongoing_requests=max(100, 4 * engine_settings.max_streams)
                                  )(serve.ingress()(Replica))
    es = asdict(engine_settings)
    serve.run(deployment.bind(named, device, dtype, threads, es, asdict(server_settings),
                              warmup, cuda_graphs), name="audiotok", route_prefix="/")
    wait_until_routed(host, port, PROXY_READY_SECONDS)
    if ready is not None:
        ready(port, replicas)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    if ray_address is None:  # our own local instance: stopping Ray stops the replicas
        ray.shutdown()
        return
    done = threading.Thread(target=serve.delete, args=("audiotok",), daemon=True)
    done.start()  # on a shared cluster remove only our application, within the drain time
    done.join(server_settings.drain_timeout)
    ray.shutdown()


def wait_until_routed(host: str, port: int, timeout: float) -> None:
    """Return once the proxy on host:port answers the app's /healthz with 200 (before it has
    the app's routes it answers 404 or 503); RuntimeError after `timeout` seconds."""
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    if ":" in probe:
        probe = f"[{probe}]"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{probe}:{port}/healthz", timeout=10) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not routed yet (an HTTPError is a URLError too)
        if time.monotonic() > deadline:
            raise RuntimeError(f"Ray Serve's proxy on port {port} did not route to the app "
                               f"within {timeout:g} s")
        time.sleep(0.2)
