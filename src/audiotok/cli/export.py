"""`audiotok export`: a loaded codec in another runtime's format."""

from __future__ import annotations

import sys

import click

from ..errors import AudiotokError
from ..models.registry import FAMILIES, export_formats
from .common import codec_options, fail, one_line


def _format_help() -> str:
    lines = ["onnx: a folder of ONNX graphs (encoder and decoder; for causal codecs also their "
             "streaming step graphs) that `audiotok.load` runs with onnxruntime, without torch"]
    for fmt, families in export_formats().items():
        if fmt != "onnx":
            exporter = families[0].exporters[fmt]
            lines.append(f"{fmt}: {exporter.help}")
    for fmt, families in export_formats().items():
        lines.append(f"{fmt} is available for {', '.join(f.title for f in families)}")
    return ". ".join(lines) + "."


def _dtypes() -> list[str]:
    found = {"f32"}
    for f in FAMILIES.values():
        for exporter in f.exporters.values():
            found.update(exporter.dtypes)
    return sorted(found)


@click.command("export")
@click.argument("model")
@codec_options
@click.option("--format", "fmt", type=click.Choice(list(export_formats())), required=True,
              help=_format_help())
@click.option("--out", "-o", required=True, type=click.Path(),
              help="Output: a new or empty folder (onnx) or a file (other formats).")
@click.option("--dtype", type=click.Choice(_dtypes()), default=None,
              help="Tensor type of formats that have a choice (default: the format's own, "
                   "e.g. f16 for s2.cpp's GGUF, whose CPU backend needs F16 conv kernels). ONNX "
                   "graphs are f32.")
@click.option("--max-push-frames", type=click.IntRange(min=1), default=None,
              help="ONNX, causal codecs: the most frames one streaming step graph call takes "
                   "(default: the codec's limit, e.g. its attention window in frames, the most "
                   "a step can take exactly); longer pushes are split by the runtime.")
@click.option("--step-graphs-only", is_flag=True,
              help="ONNX, causal codecs: leave out the whole-input encoder.onnx and "
                   "decoder.onnx (each weight once: half the size and the export time); the "
                   "runtime then encodes and decodes whole inputs through the step graphs, with "
                   "the same results, slower (measured: encode 1.55x, decode 1.2x the time).")
def export(model, fmt, out, dtype, max_push_frames, step_graphs_only):
    """Export MODEL (a name or path `audiotok.load` accepts) for another runtime."""
    from .. import load

    try:
        if fmt == "onnx":
            if dtype not in (None, "f32"):
                raise AudiotokError("ONNX graphs are exported in float32 (--dtype f32)")
            from ..export import OnnxSettings, export_onnx

            path = export_onnx(load(model, dtype="float32"), out,
                               OnnxSettings(max_push_frames, not step_graphs_only))
            size = sum(f.stat().st_size for f in path.iterdir()) / 2**20
            click.echo(f"{model} -> {path}/ ({', '.join(sorted(f.name for f in path.iterdir()))}"
                       f"; {size:.1f} MiB)")
            return
        if max_push_frames is not None or step_graphs_only:
            raise AudiotokError("--max-push-frames and --step-graphs-only apply to --format onnx")
        from ..export import export_as

        codec = load(model, dtype="float32")
        path = export_as(codec, fmt, out, dtype)
        exporter = codec.family.exporters[fmt]
        dtype = dtype or exporter.dtypes[0]
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(1)
    size = path.stat().st_size / 2**20
    what = exporter.describe.format(dtype=dtype) if exporter.describe else fmt
    click.echo(f"{model} -> {path} ({what}, {size:.1f} MiB)")
