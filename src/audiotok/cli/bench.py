"""`audiotok bench`: time encode and decode on this machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
@click.option("--kernels", "kernels", is_flag=True,
              help="Instead: measure which CPU kernel forms are faster on this machine, at "
                   "--threads threads (about 10 s), and print the rules found.")
@click.option("--save", is_flag=True,
              help="With --kernels: keep the rules for later runs on this machine (under "
                   "~/.cache/audiotok; AUDIOTOK_KERNELS=default ignores them).")
def bench(model, seconds, batch, dtypes, device, threads, repeats, with_stream, cuda_graphs,
          json_path, kernels, save):
    """Time encode and decode: real-time factor, audio seconds per second, peak memory."""
    if save and not kernels:
        raise click.UsageError("--save goes with --kernels")
    if kernels:
        set_threads(threads)
        return _kernels(save, json_path)
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


def _kernels(save: bool, json_path) -> None:
    """`bench --kernels`: calibrate the kernel rules here, print them beside this CPU's
    defaults, keep them with --save."""
    import torch

    from ..nn.kernels import calibrate
    from ..nn.kernels.cpu import this_cpu
    from ..nn.kernels.ruleset import calibration_file, default_rules

    click.echo(f"{this_cpu().describe()}, torch {torch.__version__}, "
               f"{torch.get_num_threads()} threads")
    rules, found = calibrate.calibrate(log=lambda line: click.echo(f"  {line}"))
    default = default_rules(this_cpu())
    for name, value in rules.to_dict().items():
        if name != "source":
            was = getattr(default, name)
            click.echo(f"{name:24s} {value!s:8s}" + ("" if value == was else f" (default {was})"))
    if json_path:
        calibrate.save(rules, found, Path(json_path))
    if save:
        click.echo(f"saved: {calibrate.save(rules, found)}")
    else:
        click.echo(f"(--save keeps them for this machine: {calibration_file()})")
