"""`tokenize`: a corpus in, Parquet shards out, resumable; the engines share this setup."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from .._version import __version__
from ..codec import Codec
from ..errors import AudiotokError
from ..nn.precision import parse_dtype
from .batching import ReadSettings, Row
from .shards import FORMAT, FORMAT_VERSION, OutputDir, recorded_settings, token_type
from .sources import Item, Source, open_source

ENGINES = ("local", "ray")


@dataclass
class Summary:
    """What a run did. `failed_total` counts every failed item in the output folder."""

    out: str
    items: int
    done_before: int
    tokenized: int = 0
    failed: int = 0
    failed_total: int = 0
    audio_hours: float = 0.0
    seconds: float = 0.0
    complete: bool = False

    @property
    def hours_per_hour(self) -> float:
        return self.audio_hours * 3600 / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "hours_per_hour": round(self.hours_per_hour, 2)}

    def __str__(self) -> str:
        return (f"{self.tokenized} items tokenized ({self.audio_hours:.3f} h of audio in "
                f"{self.seconds:.1f} s, {self.hours_per_hour:.1f} h/h), {self.failed} failed; "
                f"{self.done_before} were done before; output {self.out}: "
                f"{'complete' if self.complete else 'incomplete'}, {self.failed_total} failed "
                "items listed in errors.jsonl")


class Progress:
    """Items, audio hours, hours per hour and ETA, on stderr."""

    def __init__(self, total: int, done: int, enabled: bool):
        self.start = time.perf_counter()
        self.rows = self.failed = 0
        self.seconds_of_audio = 0.0
        self.bar = tqdm(total=total, initial=done, unit="item", disable=not enabled,
                        file=sys.stderr, dynamic_ncols=True, smoothing=0.05)

    def update(self, rows: list[Row] = (), failed: int = 0) -> None:
        self.rows += len(rows)
        self.failed += failed
        self.seconds_of_audio += sum(r.n_samples / r.sample_rate for r in rows)
        hours = self.seconds_of_audio / 3600
        rate = hours * 3600 / max(time.perf_counter() - self.start, 1e-9)
        self.bar.set_postfix_str(f"{hours:.2f} h audio, {rate:.1f} h/h, {self.failed} failed",
                                 refresh=False)
        self.bar.update(len(rows) + failed)

    def close(self) -> None:
        self.bar.close()


@dataclass
class Job:
    """Everything an engine needs. `model` is what actors elsewhere load (a name or path)."""

    codec: Codec
    model: str
    source: Source
    out: OutputDir
    read: ReadSettings
    batch_seconds: float
    shard_items: int
    workers: int
    progress: Progress = field(repr=False, default=None)

    def shards(self) -> list[tuple[int, list[Item]]]:
        n = self.shard_items
        items = self.source.items
        return [(i // n, items[i: i + n]) for i in range(0, len(items), n)]

    def pending(self) -> list[tuple[int, list[Item]]]:
        return [(i, shard) for i, shard in self.shards() if not self.out.done(i)]


def default_batch_seconds(device: torch.device) -> float:
    """60 s of audio per batch on a GPU; one item per batch (0) on the CPU, where batching gains
    nothing and padded items cost compute (non-causal codecs also mask them; docs/corpora.md
    measures it)."""
    return 0.0 if device.type == "cpu" else 60.0


def tokenize(source: str | os.PathLike, model: str | os.PathLike | Codec, out: str | os.PathLike,
             *, engine: str = "local", batch_seconds: float | None = None,
             workers: int | None = None,
             device: str | torch.device | None = None, dtype: torch.dtype | str = torch.float32,
             shard_items: int = 1000, min_seconds: float = 0.0, npy: bool = False,
             overwrite: bool = False, ray_address: str | None = None,
             progress: bool = True, llm=None) -> Summary:
    """Tokenize a corpus into Parquet shards under `out`; rerunning continues where it stopped.

    source: a folder of audio files, a JSONL/CSV manifest (`path`, optional `id`, `text`), or a
    `datasets` folder (save_to_disk) with one Audio column. model: a name or path for
    `audiotok.load`, or a loaded Codec (local engine). batch_seconds: audio per encode batch,
    0 for one item per batch; default: the earlier run's when continuing one, else 60 on a GPU
    and 0 on the CPU. Bad items are listed in errors.jsonl. llm: a token-id scheme from
    audiotok.export.llm (e.g. scheme_for(name, codec.codebook_sizes, "tokenizer.json")):
    each row also gets the language model's ids in an `llm_ids` column.
    """
    if engine not in ENGINES:
        raise AudiotokError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if batch_seconds is not None and not batch_seconds >= 0:
        raise AudiotokError(f"batch_seconds must not be negative, got {batch_seconds}")
    if shard_items < 1:
        raise AudiotokError(f"shard_items must be at least 1, got {shard_items}")
    if min_seconds < 0:
        raise AudiotokError(f"min_seconds must not be negative, got {min_seconds}")
    if isinstance(dtype, str):
        dtype = parse_dtype(dtype)
    start = time.perf_counter()
    src = open_source(source)
    if isinstance(model, Codec):
        codec, spec = model, model.source
        if engine == "ray" and not spec:
            raise AudiotokError("the ray engine loads the model in its actors: pass a model name "
                                "or path, not a Codec built in memory")
    else:
        from ..models import load

        codec, spec = load(model, device=device, dtype=dtype), str(model)
    if codec.streaming.scales or codec.channels != 1:
        raise AudiotokError(f"{codec.title} ({codec.channels} channels, codes with segment "
                            "scales) is not tokenized into corpus shards, which hold mono "
                            "tokens only; use `audiotok encode` (its .codes files keep them)")
    if npy and codec.global_tokens:
        raise AudiotokError(f"{codec.title}'s codes carry utterance tokens, which .npy files "
                            "cannot hold: tokenize without --npy (the shards' globals column "
                            "holds them)")
    if batch_seconds is None:  # continuing a run keeps its batches; else the device's default
        earlier = None if overwrite else recorded_settings(out).get("batch_seconds")
        batch_seconds = default_batch_seconds(codec.device) if earlier is None else earlier
    workers = default_workers(engine) if workers is None else workers
    if workers < 0 or (engine == "ray" and workers < 1):
        raise AudiotokError(f"workers must be at least {int(engine == 'ray')}, got {workers}")
    settings = {"dtype": str(codec.dtype).removeprefix("torch."),
                "device_type": codec.device.type, "batch_seconds": float(batch_seconds),
                "shard_items": shard_items, "min_seconds": float(min_seconds), "npy": bool(npy),
                "llm": None if llm is None else llm.describe()}
    if llm is not None:  # a scheme made for other codebooks fails here, not at the first shard
        llm.sequence(np.zeros((codec.num_codebooks, 1), dtype=np.int64))
    out_dir = OutputDir(out, _header(codec, spec, src, settings), overwrite=overwrite)
    out_dir.llm = llm
    try:
        read = ReadSettings(codec.input_rate, float(min_seconds),
                            src.location if src.kind == "dataset" else None, src.audio_column)
        job = Job(codec, spec, src, out_dir, read, float(batch_seconds), shard_items, workers)
        done_before = sum(len(shard) for i, shard in job.shards() if out_dir.done(i))
        job.progress = Progress(len(src.items), done_before, progress)
        try:
            if engine == "ray":
                from .ray_engine import run_ray

                run_ray(job, ray_address)
            else:
                from .local import run_local

                run_local(job)
        finally:
            job.progress.close()
        p = job.progress
        return Summary(str(out_dir.root), len(src.items), done_before, p.rows, p.failed,
                       len(out_dir.failures()), p.seconds_of_audio / 3600,
                       time.perf_counter() - start,
                       all(out_dir.done(i) for i in range(out_dir.num_shards)))
    finally:
        out_dir.close()


def _header(codec: Codec, spec: str, src: Source, settings: dict) -> dict:
    """What the manifest and every shard record about the run (see shards.BINDING)."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "audiotok_version": __version__,
            "codec": codec.name, "model": codec.title, "model_source": spec,
            "model_sha256": codec.weights_sha256(), "sample_rate": codec.sample_rate,
            "frame_rate": codec.frame_rate, "num_codebooks": codec.num_codebooks,
            "codebook_sizes": list(codec.codebook_sizes),
            "token_type": token_type(codec.codebook_sizes), "settings": settings,
            **({"global_tokens": codec.global_tokens} if codec.global_tokens else {}),
            "source": src.location, "source_kind": src.kind,
            "source_fingerprint": src.fingerprint(), "num_items": len(src.items),
            "num_shards": -(-len(src.items) // settings["shard_items"])}


def default_workers(engine: str) -> int:
    """Local: reader processes (half the CPUs, 1 to 8). Ray: model actors (1)."""
    if engine == "ray":
        return 1
    return max(1, min(8, (os.cpu_count() or 2) // 2))
