"""`audiotok export`: a loaded codec in another runtime's format."""

from __future__ import annotations

import sys

import click

from ..errors import AudiotokError
from .common import fail, one_line


@click.command("export")
@click.argument("model")
@click.option("--format", "fmt", type=click.Choice(["gguf"]), required=True,
              help="gguf: a codec-only GGUF for s2.cpp (S2 only).")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="Output file.")
@click.option("--dtype", type=click.Choice(["f16", "f32"]), default="f16", show_default=True,
              help="GGUF tensor type: f16 (every tensor, as s2.cpp's exporter writes; its CPU "
                   "backend needs F16 conv kernels) or f32.")
def export(model, fmt, out, dtype):
    """Export MODEL (a name or path `audiotok.load` accepts) for another runtime."""
    from .. import load
    from ..export import export_gguf

    try:
        codec = load(model)
        path = export_gguf(codec, out, dtype)
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(1)
    size = path.stat().st_size / 2**20
    click.echo(f"{model} -> {path} (GGUF {dtype}, architecture fish-speech-codec, "
               f"{size:.1f} MiB)")
