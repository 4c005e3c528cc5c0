"""`evaluate`: every item through every system, measured against the original, resumable."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from .._version import __version__
from ..errors import AudiotokError
from ..fileio import atomic_output
from ..nn.precision import parse_dtype
from ..pipeline.batching import ReadSettings, read_item
from ..pipeline.sources import open_source
from .metrics import MetricError, Resampled, measure, metric_names, visqol_lattice
from .results import FORMAT, FORMAT_VERSION, ResultsDir, save_example
from .summary import summarize
from .systems import CodecSystem, System, make_system
from .tokens import TokenCounts


@dataclass
class EvalSettings:
    """What `evaluate` measures and how. metrics: names from metrics.METRICS (default all);
    limit: the first N items of the source; examples: items whose audio goes into the report;
    reference_dtype: also run each codec at this precision and compare (precision study)."""

    metrics: tuple[str, ...] = ()
    limit: int | None = None
    device: str | None = None
    dtype: torch.dtype | str = torch.float32
    reference_dtype: torch.dtype | str | None = None
    examples: int = 2
    overwrite: bool = False
    progress: bool = True
    report: bool = True

    def __post_init__(self):
        self.metrics = metric_names(self.metrics)
        if isinstance(self.dtype, str):
            self.dtype = parse_dtype(self.dtype)
        if isinstance(self.reference_dtype, str):
            self.reference_dtype = parse_dtype(self.reference_dtype)
        if self.limit is not None and self.limit < 1:
            raise AudiotokError(f"limit must be at least 1, got {self.limit}")
        if self.examples < 0:
            raise AudiotokError(f"examples must not be negative, got {self.examples}")


@dataclass
class Run:
    out: ResultsDir
    systems: list[System]
    settings: EvalSettings
    done_before: int = 0
    measured: int = 0
    failed: int = 0
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)


def evaluate(source: str | os.PathLike, models, out: str | os.PathLike,
             settings: EvalSettings | None = None, **kwargs) -> dict:
    """Encode and decode every item of `source` with every model, measure each reconstruction
    against the original and write DIR/results.jsonl, summary.json, report.md and report.html.

    source: anything `tokenize` reads. models: specs (a model name, a path, `NAME=PATH`, `opus:6k`,
    `resample:16k`, `identity`) or System objects. settings: an EvalSettings, or its fields as
    keyword arguments. Rerunning continues where a run stopped. Returns the summary."""
    settings = settings or EvalSettings(**kwargs)
    if not models:
        raise AudiotokError("no models to evaluate")
    start = time.perf_counter()
    src = open_source(source)
    items = src.items[: settings.limit] if settings.limit else src.items
    systems = [m if isinstance(m, System) else make_system(
        m, device=settings.device, dtype=settings.dtype,
        reference_dtype=settings.reference_dtype) for m in models]
    names = [s.name for s in systems]
    if len(set(names)) != len(names):
        raise AudiotokError(f"two models share a name ({', '.join(names)}); name them with "
                            "NAME=MODEL")
    header = _header(src, items, systems, settings)
    results = ResultsDir(out, header, overwrite=settings.overwrite)
    try:
        run = Run(results, systems, settings, done_before=len(results.done))
        pending = [it for it in items if any((it.id, s.name) not in results.done for s in systems)]
        if pending:
            for s in systems:
                s.warmup()
        read = ReadSettings(None, 0.0, src.location if src.kind == "dataset" else None,
                            src.audio_column)
        bar = tqdm(total=len(items) * len(systems), initial=len(results.done), unit="result",
                   disable=not settings.progress, file=sys.stderr, dynamic_ncols=True)
        try:
            for item in pending:
                _item(run, item, read, bar)
        finally:
            bar.close()
        counts = _token_counts(results, systems)
        summary = summarize(header, results.results, counts)
        summary["run"] = {"done_before": run.done_before, "measured": run.measured,
                          "failed": run.failed, "seconds": time.perf_counter() - start,
                          "visqol_lattice": visqol_lattice() if "visqol" in settings.metrics
                          else None}
        with atomic_output(results.root / "summary.json") as tmp:
            tmp.write_text(json.dumps(summary, indent=1) + "\n")
        if settings.report:
            from .report import write_reports

            write_reports(results.root, summary, results.results, systems, items,
                          settings.examples, counts, read)
        return summary
    finally:
        results.close()


def _header(src, items, systems: list[System], settings: EvalSettings) -> dict:
    import hashlib

    h = hashlib.sha256()
    for it in items:
        h.update(f"{it.id}\0".encode())
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "audiotok_version": __version__,
        "source": src.location, "source_kind": src.kind, "source_fingerprint": h.hexdigest(),
        "num_items": len(items), "metrics": list(settings.metrics),
        "systems": [_system_header(s) for s in systems],
        "settings": {"dtype": str(settings.dtype).removeprefix("torch."),
                     "reference_dtype": None if settings.reference_dtype is None else
                     str(settings.reference_dtype).removeprefix("torch.")},
    }


def _system_header(s: System) -> dict:
    entry = {"name": s.name, "spec": s.spec, "kind": s.kind, "facts": {
        k: v for k, v in s.facts.items() if k not in ("source", "licence")}}
    if isinstance(s, CodecSystem):
        entry["model_sha256"] = s.codec.weights_sha256()
    return entry


def _item(run: Run, item, read: ReadSettings, bar) -> None:
    out = run.out
    todo = [s for s in run.systems if (item.id, s.name) not in out.done]
    decoded = read_item(item, read)
    base = {"id": item.id, "index": item.index}
    if decoded.error is not None:
        for s in todo:
            _record(run, {**base, "system": s.name, "error": decoded.error}, bar)
        return
    audio, rate = decoded.samples, decoded.source_rate
    ref = Resampled(audio, rate)
    example = item.index < run.settings.examples
    if example:
        save_example(out.root, "original", item.index, audio, rate)
    for s in todo:
        row = {**base, "system": s.name, "duration": len(audio) / rate, "source_rate": rate}
        try:
            result = s.run(audio, rate)
            if result.audio is None:  # an encode-only codec: tokens, no reconstruction
                values, skipped = {}, {m: "the codec does not decode (encode only)"
                                       for m in metric_names(run.settings.metrics)}
            else:
                values, skipped = measure(ref, None, result.audio, result.rate,
                                          run.settings.metrics)
            row.update(metrics=values, skipped=skipped, encode_seconds=result.encode_seconds,
                       decode_seconds=result.decode_seconds, bits=result.bits)
            if isinstance(s, CodecSystem):
                row["frames"] = int(result.tokens.shape[1])
                if s.reference is not None:
                    row["precision"] = s.precision(audio, rate, result)
        except Exception as e:  # noqa: BLE001 - one item's failure is that item's line
            text = " ".join(str(e).split()) or type(e).__name__
            if not isinstance(e, (AudiotokError, MetricError)):
                text = f"{type(e).__name__}: {text}"
            _record(run, {**base, "system": s.name, "error": text}, bar)
            continue
        # writing our own files is not the item's fault: a full disk stops the run (a rerun
        # continues from the last recorded line)
        if isinstance(s, CodecSystem):
            out.save_tokens(s.name, item.index, result.tokens)
        if example and result.audio is not None:
            save_example(out.root, s.name, item.index, result.audio, result.rate)
        _record(run, row, bar)


def _record(run: Run, row: dict, bar) -> None:
    run.out.append(row)
    if "error" in row:
        run.failed += 1
    else:
        run.measured += 1
    bar.set_postfix_str(f"{run.failed} failed", refresh=False)
    bar.update(1)


def _token_counts(results: ResultsDir, systems: list[System]) -> dict[str, TokenCounts]:
    """Code histograms of each codec system over its finished items (from tokens/)."""
    counts = {}
    for s in systems:
        if not isinstance(s, CodecSystem):
            continue
        c = TokenCounts(s.codec.codebook_sizes)
        for r in results.results:
            if r["system"] == s.name and "error" not in r:
                path = results.tokens_path(s.name, r["index"])
                if path.exists():
                    c.add(np.load(path))
        counts[s.name] = c
    return counts
