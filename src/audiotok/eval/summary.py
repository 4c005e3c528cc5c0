"""Per system and metric over the items: mean, median, 95 % bootstrap confidence interval of the
mean, count; speed, bitrate, token statistics and the precision study."""

from __future__ import annotations

from collections import Counter

import numpy as np

from .metrics import HIGHER_IS_BETTER, METRICS
from .tokens import TokenCounts, token_stats

BOOTSTRAP = 2000  # resamples
SEED = 0


def describe(values, *, resamples: int = BOOTSTRAP, seed: int = SEED) -> dict:
    """mean, median, 95 % percentile-bootstrap interval of the mean (`resamples` draws with a
    fixed seed, so a summary is reproducible), count."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"count": 0}
    if v.size == 1:
        lo = hi = float(v[0])
    else:
        rng = np.random.default_rng(seed)
        means = v[rng.integers(0, v.size, size=(resamples, v.size))].mean(axis=1)
        lo, hi = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    return {"mean": float(v.mean()), "median": float(np.median(v)), "ci95": [lo, hi],
            "count": int(v.size)}


def summarize(header: dict, results: list[dict], tokens: dict[str, TokenCounts]) -> dict:
    """The summary of a run: `results` are its result lines, `tokens` the code histograms of
    each codec system over its finished items."""
    systems = {}
    for spec in header["systems"]:
        name = spec["name"]
        rows = [r for r in results if r["system"] == name]
        ok = [r for r in rows if "error" not in r]
        values: dict[str, list[float]] = {}
        skipped: dict[str, Counter] = {}
        for r in ok:
            for k, v in r["metrics"].items():
                values.setdefault(k, []).append(v)
            for k, why in r.get("skipped", {}).items():
                skipped.setdefault(k, Counter())[why] += 1
        metrics = {}
        for metric in header["metrics"]:
            for k in METRICS[metric].names:
                metrics[k] = {**describe(values.get(k, [])),
                              "higher_is_better": HIGHER_IS_BETTER[k]}
            if metric in skipped:
                for k in METRICS[metric].names:
                    metrics[k]["skipped"] = dict(skipped[metric])
        seconds = sum(r["duration"] for r in ok)
        entry = {
            "kind": spec["kind"], "spec": spec["spec"], "facts": spec.get("facts", {}),
            "items": len(ok), "errors": len(rows) - len(ok),
            "error_reasons": dict(Counter(r["error"] for r in rows if "error" in r)),
            "audio_seconds": seconds, "metrics": metrics,
            "speed": _speed(ok, seconds),
        }
        bits = [r["bits"] for r in ok if r.get("bits") is not None]
        if bits and len(bits) == len(ok) and seconds > 0:
            entry["bitrate_kbps"] = sum(bits) / seconds / 1000
        if name in tokens and tokens[name].frames:
            entry["tokens"] = token_stats(tokens[name], spec["facts"]["frame_rate"])
        prec = [r["precision"] for r in ok if "precision" in r]
        if prec:
            entry["precision"] = {k: describe([p[k] for p in prec]) for k in prec[0]}
        systems[name] = entry
    return {"format": header["format"], "audiotok_version": header["audiotok_version"],
            "source": header["source"], "num_items": header["num_items"],
            "settings": header["settings"], "metrics": {
                m: {"rate": METRICS[m].rate, "description": METRICS[m].description,
                    "values": list(METRICS[m].names)} for m in header["metrics"]},
            "systems": systems}


def _speed(rows: list[dict], seconds: float) -> dict:
    """Real-time factors: compute seconds per second of audio (lower is faster)."""
    if not rows or seconds <= 0:
        return {}
    enc = sum(r["encode_seconds"] for r in rows)
    dec = sum(r["decode_seconds"] for r in rows)
    return {"encode_rtf": enc / seconds, "decode_rtf": dec / seconds,
            "encode_seconds": enc, "decode_seconds": dec}
