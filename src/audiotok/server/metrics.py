"""Prometheus metrics of a server, read from the engine at each scrape (prometheus_client)."""

from __future__ import annotations


def metrics_text(state) -> tuple[bytes, str]:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from prometheus_client.core import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(state))
    return generate_latest(registry), CONTENT_TYPE_LATEST


def _ready(ready: bool):
    from prometheus_client.core import GaugeMetricFamily

    g = GaugeMetricFamily("audiotok_ready", "1 once every model is warmed up (/readyz 200).")
    g.add_metric([], int(ready))
    return g


def _per_model(specs, rows: dict):
    """A gauge per (name, doc, key) of `specs`, labelled by model, from rows[model][key] (a
    value that is None is left out)."""
    from prometheus_client.core import GaugeMetricFamily

    for name, doc, key in specs:
        g = GaugeMetricFamily(name, doc, labels=["model"])
        for model, values in rows.items():
            if values[key] is not None:
                g.add_metric([model], values[key])
        yield g


class _Collector:
    def __init__(self, state):
        self.state = state

    def _http(self):
        from prometheus_client.core import CounterMetricFamily

        c = CounterMetricFamily("audiotok_http_requests", "HTTP responses by route and status.",
                                labels=["route", "status"])
        for (route, status), n in list(self.state.requests.items()):
            c.add_metric([route, str(status)], n)
        yield c

    def collect(self):
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        engine = self.state.engine
        g = GaugeMetricFamily("audiotok_draining", "1 while shutting down.")
        g.add_metric([], int(self.state.draining))
        yield g
        g = GaugeMetricFamily("audiotok_websockets", "Open WebSocket streams.")
        g.add_metric([], self.state.websockets)
        yield g
        if engine is None:  # the models are still loading
            yield _ready(False)
            yield from self._http()
            return
        load = engine.load()
        with engine.cond:
            stats = engine.stats
            steps = dict(stats.steps)
            seconds = dict(stats.step_seconds)
            audio = dict(stats.audio_seconds)
            errors = dict(stats.errors)
            hists = {name: (h.bounds, list(h.counts), h.count, h.sum) for name, h in
                     (("batch", stats.batch_hist), ("step", stats.step_hist),
                      ("first_audio", stats.first_audio))}
        yield from _per_model((
            ("audiotok_open_streams", "Open streams per model.", "streams"),
            ("audiotok_queued_requests", "Offline requests waiting per model.",
             "queued_requests"),
            ("audiotok_queued_frames", "Token frames waiting in decode streams.",
             "queued_frames")), load)
        yield _ready(engine.ready())
        yield from _per_model((
            ("audiotok_warmup_seconds", "Compute time spent warming up, per model.", "seconds"),
            ("audiotok_warmup_first_phase_after_seconds", "Seconds from the warm-up's start to "
             "the end of its first phase (batch 1), per model.", "first_phase_after_s"),
            ("audiotok_warmup_complete_after_seconds", "Seconds from the warm-up's start to its "
             "end, per model.", "complete_after_s"),
            ("audiotok_warmup_shapes", "Step shapes the warm-up runs, per model.", "shapes"),
            ("audiotok_warmup_shapes_done", "Step shapes warmed so far, per model.", "done")),
            engine.warmup_status())
        c = CounterMetricFamily("audiotok_steps", "Engine batches run.",
                                labels=["model", "kind"])
        for (model, kind), n in steps.items():
            c.add_metric([model, kind], n)
        yield c
        c = CounterMetricFamily("audiotok_step_seconds", "Time in engine batches.",
                                labels=["model", "kind"])
        for (model, kind), v in seconds.items():
            c.add_metric([model, kind], v)
        yield c
        c = CounterMetricFamily("audiotok_audio_seconds", "Audio produced (decode).",
                                labels=["model"])
        for model, v in audio.items():
            c.add_metric([model], v)
        yield c
        c = CounterMetricFamily("audiotok_errors",
                                "Failed streams, requests and warm-up shapes by error.",
                                labels=["kind"])
        for kind, n in errors.items():
            c.add_metric([kind], n)
        yield c
        yield from self._http()
        for name, doc in (("batch", "Streams or requests per engine batch."),
                          ("step", "Seconds per engine batch."),
                          ("first_audio", "Seconds from a stream's first push to its first "
                                          "output.")):
            bounds, counts, count, total = hists[name]
            buckets = [(f"{b:g}", n) for b, n in zip(bounds, counts, strict=True)]
            buckets.append(("+Inf", count))
            unit = "" if name == "batch" else "_seconds"
            yield HistogramMetricFamily(f"audiotok_{name}{unit}", doc, buckets=buckets,
                                        sum_value=total)
