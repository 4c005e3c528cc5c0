"""`audiotok export`: a loaded codec in another runtime's format."""

from __future__ import annotations

import sys

import click

from ..errors import AudiotokError
from .common import fail, one_line


@click.command("export")
@click.argument("model")
@click.option("--format", "fmt", type=click.Choice(["onnx", "gguf"]), required=True,
              help="onnx: a folder of ONNX graphs (encoder and decoder; for S2 also their "
                   "streaming step graphs) that `audiotok.load` runs with onnxruntime, "
                   "without torch (S2 and X-Codec2). gguf: a codec-only GGUF for s2.cpp (S2).")
@click.option("--out", "-o", required=True, type=click.Path(),
              help="Output: a new or empty folder (onnx) or a file (gguf).")
@click.option("--dtype", type=click.Choice(["f16", "f32"]), default=None,
              help="GGUF tensor type: f16 (the default; every tensor, as s2.cpp's exporter "
                   "writes; its CPU backend needs F16 conv kernels) or f32. ONNX graphs are f32.")
@click.option("--max-push-frames", type=click.IntRange(min=1), default=None,
              help="ONNX, S2: the most frames one streaming step graph call takes (default: the "
                   "attention window in frames, the most a step can take exactly); longer "
                   "pushes are split by the runtime.")
def export(model, fmt, out, dtype, max_push_frames):
    """Export MODEL (a name or path `audiotok.load` accepts) for another runtime."""
    from .. import load

    try:
        if fmt == "onnx":
            if dtype not in (None, "f32"):
                raise AudiotokError("ONNX graphs are exported in float32 (--dtype f32)")
            from ..export import export_onnx

            path = export_onnx(load(model, dtype="float32"), out,
                               max_push_frames=max_push_frames)
            size = sum(f.stat().st_size for f in path.iterdir()) / 2**20
            click.echo(f"{model} -> {path}/ ({', '.join(sorted(f.name for f in path.iterdir()))}"
                       f"; {size:.1f} MiB)")
            return
        if max_push_frames is not None:
            raise AudiotokError("--max-push-frames applies to --format onnx")
        from ..export import export_gguf

        path = export_gguf(load(model, dtype="float32"), out, dtype or "f16")
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(1)
    size = path.stat().st_size / 2**20
    click.echo(f"{model} -> {path} (GGUF {dtype or 'f16'}, architecture fish-speech-codec, "
               f"{size:.1f} MiB)")
