"""`audiotok tokenize`: a corpus into resumable Parquet shards."""

from __future__ import annotations

import json
import sys

import click

from ..errors import AudiotokError
from ..export.llm import scheme_help, scheme_names
from ..fileio import atomic_output
from .common import (
    DTYPE_NAMES,
    device_option,
    fail,
    model_option,
    one_line,
    set_threads,
    threads_option,
)

TOKENIZE_FAILED_CAP = 100  # exit status: failed items, at most this
TOKENIZE_STOPPED = 101  # exit status: the run could not start or stopped


@click.command()
@click.argument("source", type=click.Path(exists=True))
@model_option
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False),
              help="Output folder: Parquet shards, manifest.json, errors.jsonl.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: this machine; ray: Ray Data (a local instance, or --ray-address).")
@click.option("--batch-seconds", type=click.FloatRange(min=0), default=None,
              help="Audio per encode batch (items of similar length); 0: one item per batch. "
                   "Default: 60 on a GPU, 0 on the CPU.")
@click.option("--workers", type=click.IntRange(min=0), default=None,
              help="local: reader processes (0: read in the main process; default half the "
                   "CPUs, 1 to 8). ray: model actors (default 1).")
@device_option
@click.option("--dtype", type=click.Choice(list(DTYPE_NAMES)), default="float32",
              show_default=True, help="Model precision (reduced precision changes some tokens).")
@threads_option
@click.option("--shard-items", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Items per Parquet shard (the unit of resumption).")
@click.option("--min-seconds", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Items shorter than this go to errors.jsonl as too short.")
@click.option("--npy", is_flag=True,
              help="Also write each item's tokens as npy/<id>.npy (int64 [K, T], fish-speech "
                   "layout).")
@click.option("--overwrite", is_flag=True,
              help="Replace an output folder written with another model or settings.")
@click.option("--ray-address", default=None,
              help="Ray cluster to join (e.g. ray://head:10001 or auto); default: start a "
                   "local instance.")
@click.option("--llm", type=click.Choice(scheme_names()), default=None,
              help="Also write each item's language-model token ids (column llm_ids) in one "
                   f"of these schemes: {scheme_help()}.")
@click.option("--tokenizer", "tokenizer_path", type=click.Path(exists=True),
              help="The language model's tokenizer.json (or its folder) for every --llm "
                   "scheme but generic.")
@click.option("--llm-offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="--llm generic: the first id.")
@click.option("--llm-delay", is_flag=True,
              help="--llm generic: MusicGen's delay pattern (codebook k k frames later).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the run's summary as JSON to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def tokenize(source, model, out, engine, batch_seconds, workers, device, dtype, threads,
             shard_items, min_seconds, npy, overwrite, ray_address, llm, tokenizer_path,
             llm_offset, llm_delay, json_path, quiet):
    """Tokenize a corpus into Parquet shards; rerun the same command to resume.

    SOURCE: a folder of audio files, a JSONL/CSV manifest (path, optional id and text columns),
    or a `datasets` folder written by save_to_disk with one Audio column. Exit status: 0 when
    every item was tokenized, else the number of failed items (at most 100; see errors.jsonl);
    101 when the run could not start or stopped.
    """
    from ..pipeline import tokenize as run

    set_threads(threads)
    try:
        scheme = None
        if llm:
            from .. import load
            from ..export.llm import scheme_for

            model = load(model, device=device, dtype=dtype)
            scheme = scheme_for(llm, model.codebook_sizes, tokenizer_path, **(
                {"offset": llm_offset, "delay": llm_delay} if llm == "generic" else {}))
        summary = run(source, model, out, engine=engine, batch_seconds=batch_seconds,
                      workers=workers, device=device, dtype=dtype, shard_items=shard_items,
                      min_seconds=min_seconds, npy=npy, overwrite=overwrite,
                      ray_address=ray_address, progress=not quiet, llm=scheme)
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(TOKENIZE_STOPPED)
    click.echo(str(summary), err=True)
    if json_path:
        with atomic_output(json_path) as tmp:
            tmp.write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    sys.exit(min(summary.failed_total, TOKENIZE_FAILED_CAP))
