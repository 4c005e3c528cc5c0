"""What the `audiotok` commands share: options, model loading, input/output planning, errors."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

import click
from tqdm import tqdm

from ..audio import collect_files
from ..errors import AudiotokError
from ..models import with_options
from ..models.registry import DEFAULT_MODEL

CODES_SUFFIXES = {".codes", ".npy"}

_model_flag = click.option(
    "--model", "-m", default=DEFAULT_MODEL, show_default=True,
    help="Model name (fetched from the Hugging Face Hub on first use) or a local checkpoint "
         "file or directory; options may follow as NAME?option=value&... (see --codebooks).")


def codec_options(f):
    """The codec families' load options (`audiotok info --codecs` lists them; e.g.
    --codebooks), folded into the `model` argument (or every one of `models`) as
    `?option=value`. A family that does not take an option refuses it at load."""
    from ..models.registry import FAMILIES

    names: dict[str, list] = {}
    for family in FAMILIES.values():
        for name, option in family.options.items():
            names.setdefault(name, []).append((family, option))

    @functools.wraps(f)
    def wrapper(*args, **kw):
        opts = {name: kw.pop(name) for name in names}
        if "model" in kw and kw["model"] is None and any(v is not None for v in opts.values()):
            kw["model"] = DEFAULT_MODEL  # options without --model (`info`): the default's
        if kw.get("model") is not None:
            kw["model"] = with_options(kw["model"], **opts)
        if kw.get("models"):
            kw["models"] = tuple(with_options(m, **opts) for m in kw["models"])
        return f(*args, **kw)

    for name, declared in sorted(names.items(), reverse=True):
        kind = declared[0][1].type
        text = "; ".join(f"{family.title}: {option.help}" for family, option in declared)
        wrapper = click.option(f"--{name}", type=click.IntRange(min=1) if kind is int else str,
                               default=None, help=f"Load option. {text}.")(wrapper)
    return wrapper


def model_option(f):
    """--model and the codec options."""
    return _model_flag(codec_options(f))
device_option = click.option("--device", default="cpu", show_default=True,
                             help="Torch device, e.g. cpu, cuda, cuda:1.")
threads_option = click.option("--threads", type=int, default=None,
                              help="CPU threads for torch (default: torch's choice).")
subtype_option = click.option(
    "--subtype", default=None,
    help="Output sample format, e.g. PCM_16 (WAV default), PCM_24, FLOAT.")


def model_options(f):
    """--model, --device, --threads."""
    return model_option(device_option(threads_option(f)))


def files_in_out(output_help: str):
    """INPUTS... and --output/-o."""
    def wrap(f):
        f = click.option("--output", "-o", required=True, help=output_help)(f)
        return click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))(f)
    return wrap


def fail(message: str) -> None:
    click.echo(f"audiotok: error: {message}", err=True)


DTYPE_NAMES = ("float32", "bfloat16", "float16")  # nn.precision.DTYPES, without importing torch


def set_threads(threads: int | None) -> None:
    """torch's CPU threads (torch is imported here, not when the command line starts)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def load_codec(model: str, device: str, threads: int | None):
    from .. import load

    set_threads(threads)
    try:
        return load(model, device=device)
    except (AudiotokError, OSError) as e:
        fail(str(e))
        sys.exit(1)


def plan(inputs: tuple[str, ...], out: str, suffixes: set[str], out_suffix: str,
          single_suffixes: set[str]) -> list[tuple[Path, Path]]:
    """(input file, output file) pairs. One input file and an output with a known suffix means
    that file; otherwise the output is a folder that mirrors the inputs' trees."""
    files = collect_files(inputs, suffixes)
    out_path = Path(out)
    if (len(inputs) == 1 and not Path(inputs[0]).is_dir() and len(files) == 1
            and out_path.suffix.lower() in single_suffixes and not out_path.is_dir()):
        return [(files[0][0], out_path)]
    return [(f, out_path / rel.with_suffix(out_suffix)) for f, rel in files]


def run_each(pairs: list[tuple[Path, Path]], work: Callable[[Path, Path], str | None],
              verbose: bool = True) -> None:
    """Run `work` per pair with a progress bar when there are several; report and exit."""
    if not pairs:
        fail("no input files found")
        sys.exit(1)
    failed = 0
    bar = tqdm(pairs, unit="file", disable=len(pairs) < 2, file=sys.stderr)
    for src, dst in bar:
        try:
            message = work(src, dst)
        except (AudiotokError, OSError, RuntimeError) as e:
            failed += 1
            text = one_line(e)
            text = text if str(src) in text else f"{src}: {text}"
            tqdm.write(f"audiotok: error: {text}", file=sys.stderr)
            continue
        if message and verbose:
            tqdm.write(message, file=sys.stdout)
    if failed:
        fail(f"{failed} of {len(pairs)} files failed")
        sys.exit(1)


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    prefix = "" if isinstance(e, AudiotokError) else f"{type(e).__name__}: "
    return prefix + (text or type(e).__name__)
