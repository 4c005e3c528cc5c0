"""`audiotok bench`: time encode and decode on this machine."""

from __future__ import annotations

import json
import sys

import click

from ..errors import AudiotokError
from ..fileio import atomic_output
from .common import device_option, fail, model_option, set_threads, threads_option


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise click.BadParameter(f"expected positive numbers, got {text!r}")
    return values


@click.command()
@model_option
@click.option("--seconds", default="10", show_default=True,
              help="Audio durations to time, comma-separated (e.g. 10,60).")
@click.option("--batch", default="1", show_default=True,
              help="Batch sizes, comma-separated (e.g. 1,16).")
@click.option("--dtype", "dtypes", default="float32", show_default=True,
              help="float32, bfloat16 or float16; comma-separated for several.")
@device_option
@threads_option
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs per measurement (median reported), after one warm-up.")
@click.option("--stream", "with_stream", is_flag=True,
              help="Also time the streaming decoder per pushed frame (1- and 4-frame pushes).")
@click.option("--cuda-graphs", is_flag=True,
              help="On a CUDA device, replay encode/decode as CUDA graphs cached per shape.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the rows as JSON to this file.")
def bench(model, seconds, batch, dtypes, device, threads, repeats, with_stream, cuda_graphs,
          json_path):
    """Time encode and decode: real-time factor, audio seconds per second, peak memory."""
    from .. import bench as bench_module
    from .. import load
    from ..nn.precision import parse_dtype

    durations = _floats(seconds)
    batches = [int(b) for b in _floats(batch)]
    set_threads(threads)
    rows = []
    for name in dtypes.split(","):
        try:
            dtype = parse_dtype(name.strip())
        except AudiotokError as e:
            raise click.BadParameter(str(e), param_hint="--dtype") from None
        try:
            codec = load(model, device=device, dtype=dtype, cuda_graphs=cuda_graphs)
        except (AudiotokError, OSError) as e:
            fail(str(e))
            sys.exit(1)
        rows += bench_module.run(codec, durations, batches, repeats, stream=with_stream)
        del codec
    click.echo(bench_module.table(rows))
    if json_path:
        with atomic_output(json_path) as tmp:
            tmp.write_text(json.dumps(bench_module.as_dicts(rows), indent=1) + "\n")
