"""The `audiotok` command: encode, decode, reconstruct, bench, tokenize, info."""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click
import numpy as np
import soundfile as sf
import torch
from tqdm import tqdm

from ._version import __version__
from .audio import AUDIO_SUFFIXES, collect_files, write_audio
from .codes import Codes, load_codes
from .errors import AudiotokError, CodesError
from .fileio import atomic_output
from .nn.precision import DTYPES, parse_dtype
from .stream import decode_to_file, encode_file

CODES_SUFFIXES = {".codes", ".npy"}
DEFAULT_MODEL = "s2-pro"

model_option = click.option(
    "--model", "-m", default=DEFAULT_MODEL, show_default=True,
    help="Model name (fetched from the Hugging Face Hub on first use) or a local checkpoint "
         "file or directory.")
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


def _fail(message: str) -> None:
    click.echo(f"audiotok: error: {message}", err=True)


def _load_codec(model: str, device: str, threads: int | None):
    from . import load

    if threads:
        torch.set_num_threads(threads)
    try:
        return load(model, device=device)
    except (AudiotokError, OSError) as e:
        _fail(str(e))
        sys.exit(1)


def _plan(inputs: tuple[str, ...], out: str, suffixes: set[str], out_suffix: str,
          single_suffixes: set[str]) -> list[tuple[Path, Path]]:
    """(input file, output file) pairs. One input file and an output with a known suffix means
    that file; otherwise the output is a folder that mirrors the inputs' trees."""
    files = collect_files(inputs, suffixes)
    out_path = Path(out)
    if (len(inputs) == 1 and not Path(inputs[0]).is_dir() and len(files) == 1
            and out_path.suffix.lower() in single_suffixes and not out_path.is_dir()):
        return [(files[0][0], out_path)]
    return [(f, out_path / rel.with_suffix(out_suffix)) for f, rel in files]


def _run_each(pairs: list[tuple[Path, Path]], work: Callable[[Path, Path], str | None],
              verbose: bool = True) -> None:
    """Run `work` per pair with a progress bar when there are several; report and exit."""
    if not pairs:
        _fail("no input files found")
        sys.exit(1)
    failed = 0
    bar = tqdm(pairs, unit="file", disable=len(pairs) < 2, file=sys.stderr)
    for src, dst in bar:
        try:
            message = work(src, dst)
        except (AudiotokError, OSError, RuntimeError) as e:
            failed += 1
            text = _one_line(e)
            text = text if str(src) in text else f"{src}: {text}"
            tqdm.write(f"audiotok: error: {text}", file=sys.stderr)
            continue
        if message and verbose:
            tqdm.write(message, file=sys.stdout)
    if failed:
        _fail(f"{failed} of {len(pairs)} files failed")
        sys.exit(1)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    prefix = "" if isinstance(e, AudiotokError) else f"{type(e).__name__}: "
    return prefix + (text or type(e).__name__)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="audiotok")
def main() -> None:
    """Neural audio codec tokenizers: audio <-> tokens with the S2 Pro codec."""


@main.command()
@files_in_out("Output codes file (one input file) or folder (mirrors input folders).")
@click.option("--format", "fmt", type=click.Choice(["codes", "npy"]), default="codes",
              show_default=True,
              help="codes: self-describing archive; npy: integer [K, T] as fish-speech writes.")
@model_options
def encode(inputs, output, fmt, model, device, threads):
    """Encode audio files (or folders of them) into codes files."""
    pairs = _plan(inputs, output, AUDIO_SUFFIXES, "." + fmt, CODES_SUFFIXES)
    codec = _load_codec(model, device, threads)

    def work(src: Path, dst: Path) -> str:
        codes = encode_file(codec, src)
        codes.save(dst)
        return f"{src} -> {dst}: {int(codes.lengths[0])} frames x {codec.num_codebooks} codebooks"

    _run_each(pairs, work)


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
@click.option("--output", "-o", required=True,
              help="Output audio file (one input file) or folder; with --stream, a file or - "
                   "for raw PCM on stdout.")
@click.option("--clamp", is_flag=True,
              help="Clamp out-of-range tokens into the codebook instead of failing.")
@click.option("--stream", "stream_mode", is_flag=True,
              help="Decode incrementally and write audio as it goes (causal codecs: S2). INPUT "
                   "is a codes file or - for text on stdin, one frame per line (K integers).")
@click.option("--push-frames", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --stream: frames decoded per step.")
@model_options
@subtype_option
def decode(inputs, output, clamp, stream_mode, push_frames, model, device, threads, subtype):
    """Decode codes files (.codes or fish-speech .npy) into audio files."""
    if stream_mode:
        if len(inputs) != 1:
            raise click.UsageError("--stream takes one input (a codes file or -)")
        codec = _load_codec(model, device, threads)
        try:
            _decode_stream(codec, inputs[0], output, clamp, push_frames, subtype)
        except (AudiotokError, OSError) as e:
            _fail(_one_line(e))
            sys.exit(1)
        return
    if "-" in inputs:
        raise click.UsageError("reading tokens from stdin (-) needs --stream")
    pairs = _plan(inputs, output, CODES_SUFFIXES, ".wav", AUDIO_SUFFIXES)
    codec = _load_codec(model, device, threads)

    def work(src: Path, dst: Path) -> str:
        codes = load_codes(src)
        if len(codes) == 1:
            decode_to_file(codec, codes, dst, subtype, clamp=clamp)
            return f"{src} -> {dst}"
        audio = codec.decode(codes, clamp=clamp).cpu()
        written = []
        lengths = codec.audio_lengths(codes.lengths, codes.num_samples).tolist()
        for i, n in enumerate(lengths):
            target = dst if len(codes) == 1 else dst.with_name(f"{dst.stem}_{i}{dst.suffix}")
            write_audio(target, audio[i, 0, :n], codec.sample_rate, subtype)
            written.append(str(target))
        return f"{src} -> {', '.join(written)}"

    _run_each(pairs, work)


def _text_frames(lines, num_codebooks: int):
    """Frames [K, 1] from text lines of K integers (blank lines and # comments skipped)."""
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        try:
            values = [int(v) for v in line.split()]
        except ValueError:
            raise CodesError(f"stdin line {number}: not integers: {line[:60]!r}") from None
        if len(values) != num_codebooks:
            raise CodesError(f"stdin line {number}: expected {num_codebooks} integers (one "
                             f"frame), got {len(values)}")
        yield torch.tensor(values)[:, None]


def _decode_stream(codec, source: str, output: str, clamp: bool, push_frames: int,
                   subtype: str | None) -> None:
    """Push frames as they arrive; write each piece of audio at once."""
    limit = None
    if source == "-":
        frames = _text_frames(sys.stdin, codec.num_codebooks)
    else:
        codes = load_codes(source)
        if len(codes) != 1:
            raise CodesError(f"{source}: --stream decodes one item, the file holds {len(codes)}")
        tokens = codes.tokens[0, :, : int(codes.lengths[0])]
        frames = iter(tokens.split(1, dim=-1))
        limit = int(codec.audio_lengths(codes.lengths, codes.num_samples)[0])
    with contextlib.ExitStack() as stack:
        dec = stack.enter_context(codec.stream_decoder(batch_size=1, clamp=clamp))
        if output == "-":
            raw = np.int16 if subtype == "PCM_16" else np.float32
            write = _raw_writer(sys.stdout.buffer, raw)
        else:
            tmp = stack.enter_context(atomic_output(output))
            kind = Path(output).suffix.lstrip(".").upper()
            sink = stack.enter_context(sf.SoundFile(
                tmp, "w", codec.sample_rate, 1, subtype,
                format=kind if kind in sf.available_formats() else "WAV"))
            write = sink.write
        written, pending = 0, []
        for frame in itertools.chain(frames, [None]):
            if frame is not None:
                pending.append(frame)
            if pending and (len(pending) >= push_frames or frame is None):
                pcm = dec.push(torch.cat(pending, -1)[None])[0, 0].numpy()
                pending = []
                if limit is not None:
                    pcm = pcm[: max(0, limit - written)]
                write(pcm)
                written += pcm.size
        write(dec.flush()[0, 0].numpy())


def _raw_writer(stream, dtype):
    def write(pcm: np.ndarray) -> None:
        data = (np.clip(pcm, -1, 1) * 32767).astype("<i2") if dtype == np.int16 else \
            pcm.astype("<f4")
        stream.write(data.tobytes())
        stream.flush()
    return write


@main.command()
@files_in_out("Output audio file (one input file) or folder.")
@click.option("--sample-rate", type=int, default=None,
              help="Resample the output to this rate (default: the codec's rate).")
@model_options
@subtype_option
def reconstruct(inputs, output, sample_rate, model, device, threads, subtype):
    """Encode then decode audio files: hear what the codec keeps."""
    from .audio import resample

    pairs = _plan(inputs, output, AUDIO_SUFFIXES, ".wav", AUDIO_SUFFIXES)
    codec = _load_codec(model, device, threads)
    rate = sample_rate or codec.sample_rate

    def work(src: Path, dst: Path) -> str:
        t0 = time.perf_counter()
        codes = encode_file(codec, src)
        t1 = time.perf_counter()
        if rate == codec.sample_rate:
            decode_to_file(codec, codes, dst, subtype)
        else:
            audio = codec.decode(codes)[0, 0].cpu().numpy()
            if rate != codec.sample_rate:
                audio = resample(audio, codec.sample_rate, rate)
            write_audio(dst, audio, rate, subtype)
        t2 = time.perf_counter()
        seconds = int(codes.num_samples[0]) / codec.sample_rate
        src_rate = codes.meta["source_sample_rate"][0]
        frames = int(codes.lengths[0])
        return (f"{src} ({seconds:.2f} s, {src_rate} Hz) -> {frames} frames x "
                f"{codec.num_codebooks} codebooks ({codec.info()['bitrate_bps'] / 1000:.2f} kbit/s)"
                f" -> {dst} ({rate} Hz); encode {t1 - t0:.2f} s, decode {t2 - t1:.2f} s, "
                f"real-time factor {(t2 - t0) / seconds:.2f}")

    _run_each(pairs, work)


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise click.BadParameter(f"expected positive numbers, got {text!r}")
    return values


@main.command()
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
    from . import bench as bench_module
    from . import load

    durations = _floats(seconds)
    batches = [int(b) for b in _floats(batch)]
    if threads:
        torch.set_num_threads(threads)
    rows = []
    for name in dtypes.split(","):
        try:
            dtype = parse_dtype(name.strip())
        except AudiotokError as e:
            raise click.BadParameter(str(e), param_hint="--dtype") from None
        try:
            codec = load(model, device=device, dtype=dtype, cuda_graphs=cuda_graphs)
        except (AudiotokError, OSError) as e:
            _fail(str(e))
            sys.exit(1)
        rows += bench_module.run(codec, durations, batches, repeats, stream=with_stream)
        del codec
    click.echo(bench_module.table(rows))
    if json_path:
        with atomic_output(json_path) as tmp:
            tmp.write_text(json.dumps(bench_module.as_dicts(rows), indent=1) + "\n")


TOKENIZE_FAILED_CAP = 100  # exit status: failed items, at most this
TOKENIZE_STOPPED = 101  # exit status: the run could not start or stopped


@main.command()
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
@click.option("--dtype", type=click.Choice(list(DTYPES)), default="float32",
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
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the run's summary as JSON to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def tokenize(source, model, out, engine, batch_seconds, workers, device, dtype, threads,
             shard_items, min_seconds, npy, overwrite, ray_address, json_path, quiet):
    """Tokenize a corpus into Parquet shards; rerun the same command to resume.

    SOURCE: a folder of audio files, a JSONL/CSV manifest (path, optional id and text columns),
    or a `datasets` folder written by save_to_disk with one Audio column. Exit status: 0 when
    every item was tokenized, else the number of failed items (at most 100; see errors.jsonl);
    101 when the run could not start or stopped.
    """
    from .pipeline import tokenize as run

    if threads:
        torch.set_num_threads(threads)
    try:
        summary = run(source, model, out, engine=engine, batch_seconds=batch_seconds,
                      workers=workers, device=device, dtype=dtype, shard_items=shard_items,
                      min_seconds=min_seconds, npy=npy, overwrite=overwrite,
                      ray_address=ray_address, progress=not quiet)
    except (AudiotokError, OSError) as e:
        _fail(_one_line(e))
        sys.exit(TOKENIZE_STOPPED)
    click.echo(str(summary), err=True)
    if json_path:
        with atomic_output(json_path) as tmp:
            tmp.write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    sys.exit(min(summary.failed_total, TOKENIZE_FAILED_CAP))


@main.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True))
@click.option("--model", "-m", default=None,
              help=f"Model to describe (default {DEFAULT_MODEL} when no files are given).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@device_option
def info(files, model, as_json, device):
    """Facts about a model (sizes, rates, parameters, weight licence) or about codes files."""
    report: dict = {}
    failed = 0
    if model or not files:
        report["model"] = _load_codec(model or DEFAULT_MODEL, device, None).info()
    for f in files:
        try:
            report[f] = _codes_facts(load_codes(f))
        except AudiotokError as e:
            failed += 1
            _fail(f"{f}: {_one_line(e)}")
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        for name, facts in report.items():
            click.echo(f"{name}:")
            for k, v in facts.items():
                click.echo(f"  {k}: {v}")
    if failed:
        sys.exit(1)


def _codes_facts(codes: Codes) -> dict:
    facts = {
        "codec": codes.codec or "unknown (.npy)",
        "items": len(codes),
        "codebooks": codes.tokens.shape[1],
        "frames": codes.lengths.tolist(),
    }
    if codes.sample_rate:
        facts["sample_rate"] = codes.sample_rate
        facts["frame_rate"] = codes.frame_rate
        facts["durations_s"] = [round(n / codes.frame_rate, 3) for n in codes.lengths.tolist()]
    if codes.num_samples is not None:
        facts["num_samples"] = codes.num_samples.tolist()
        if codes.sample_rate:
            facts["durations_s"] = [round(n / codes.sample_rate, 3)
                                    for n in codes.num_samples.tolist()]
    facts.update({k: v for k, v in codes.meta.items()})
    return facts


if __name__ == "__main__":
    main()
