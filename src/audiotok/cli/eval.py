"""`audiotok eval`: codecs and baselines measured side by side on a corpus, with a report."""

from __future__ import annotations

import json
import sys

import click

from ..errors import AudiotokError
from ..fileio import atomic_output
from .common import DTYPE_NAMES, device_option, fail, one_line, set_threads, threads_option

EVAL_FAILED_CAP = 100  # exit status: failed results, at most this
EVAL_STOPPED = 101  # exit status: the run could not start or stopped


def _metric_list(ctx, param, value):
    names = [n.strip() for v in value for n in v.split(",") if n.strip()]
    from ..eval.metrics import metric_names

    try:
        return metric_names(names)
    except AudiotokError as e:
        raise click.BadParameter(str(e)) from None


@click.command("eval")
@click.argument("source", required=False, type=click.Path(exists=True))
@click.option("--model", "-m", "models", multiple=True,
              help="What to evaluate, repeat for several: a model name or path (NAME=PATH to "
                   "name it), opus:BITRATE (e.g. opus:6k, Ogg Opus through libsndfile), "
                   "resample:RATE (e.g. resample:16k: resampling alone), identity.")
@click.option("--out", "-o", type=click.Path(file_okay=False),
              help="Output folder: results.jsonl, summary.json, report.md, report.html.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Only the first N items of SOURCE.")
@device_option
@click.option("--dtype", type=click.Choice(list(DTYPE_NAMES)), default="float32", show_default=True,
              help="Model precision.")
@click.option("--reference-dtype", type=click.Choice(list(DTYPE_NAMES)), default=None,
              help="Also run each codec at this precision: adds the share of tokens equal to "
                   "it and the SNR of decoding against it (e.g. --dtype bfloat16 "
                   "--reference-dtype float32).")
@threads_option
@click.option("--metrics", "metrics", multiple=True, callback=_metric_list,
              help="Metrics to compute, comma-separated (default all): mel_distance, "
                   "stft_distance, si_sdr, snr, pesq_wb, pesq_nb, stoi, estoi, visqol, dnsmos.")
@click.option("--examples", type=click.IntRange(min=0), default=2, show_default=True,
              help="Items whose audio and spectrograms go into the report.")
@click.option("--tokens", "tokens_dir", type=click.Path(exists=True, file_okay=False),
              help="Instead: token statistics of a `tokenize` output folder (no re-encoding).")
@click.option("--overwrite", is_flag=True,
              help="Replace an output folder written with other models or settings.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the summary (or the token statistics) as JSON to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def eval_command(source, models, out, limit, device, dtype, reference_dtype, threads, metrics,
                 examples, tokens_dir, overwrite, json_path, quiet):
    """Measure what codecs keep: encode and decode every item of SOURCE with every model and
    compare the reconstruction with the original; rerun the same command to resume.

    SOURCE: anything `tokenize` reads (a folder of audio files, a JSONL/CSV manifest, a datasets
    folder). Exit status: 0 when every result was measured, else the number of failed results
    (at most 100; reasons in results.jsonl and the report); 101 when the run could not start.
    """
    set_threads(threads)
    if tokens_dir:
        _tokens(tokens_dir, json_path)
        return
    if not source or not models or not out:
        fail("eval needs SOURCE, at least one --model/-m and --out/-o (or --tokens DIR)")
        sys.exit(EVAL_STOPPED)
    from ..eval import EvalSettings, evaluate
    from ..eval.report import tables

    try:
        settings = EvalSettings(metrics=metrics, limit=limit, device=device, dtype=dtype,
                                reference_dtype=reference_dtype, examples=examples,
                                overwrite=overwrite, progress=not quiet)
        summary = evaluate(source, list(models), out, settings)
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(EVAL_STOPPED)
    title, header, rows = tables(summary)[0]
    click.echo(f"{title}\n{_text_table(header, rows)}")
    run = summary["run"]
    click.echo(f"{run['measured']} results measured, {run['failed']} failed, "
               f"{run['done_before']} done before, {run['seconds']:.1f} s; report: "
               f"{out}/report.html", err=True)
    if json_path:
        _write_json(json_path, summary)
    failed = sum(s["errors"] for s in summary["systems"].values())
    sys.exit(min(failed, EVAL_FAILED_CAP))


def _tokens(folder: str, json_path: str | None) -> None:
    from ..eval.tokens import format_stats, tokens_folder_stats

    try:
        stats = tokens_folder_stats(folder)
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(EVAL_STOPPED)
    click.echo(f"{stats['model']} ({stats['model_source']}), {stats['items']} items\n"
               + format_stats(stats))
    if json_path:
        _write_json(json_path, stats)


def _write_json(path: str, data: dict) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n")


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header] + rows]
    return "\n".join(lines)
