"""The `audiotok` command, one module per command family."""

from __future__ import annotations

import os

import click

from .._version import __version__
from . import _allocator  # noqa: F401  (before anything imports torch)
from .bench import bench
from .convert import decode, encode, reconstruct, voice
from .eval import eval_command
from .export import export
from .info import info
from .serve import serve
from .tokenize import tokenize


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="audiotok")
def main() -> None:
    """Neural audio codec tokenizers for speech LLMs: audio <-> tokens (`audiotok info` lists
    the codecs)."""
    # (nn/kernels reads these when a model first runs; refused here at once)
    gemm = os.environ.get("AUDIOTOK_CPU_GEMM", "").strip().lower()
    if gemm not in ("", "onednn", "mkl"):
        raise click.UsageError(f"AUDIOTOK_CPU_GEMM must be onednn or mkl, got {gemm!r}")
    kernels = os.environ.get("AUDIOTOK_KERNELS", "").strip()
    if kernels not in ("", "default") and not os.path.isfile(kernels):
        raise click.UsageError(f"AUDIOTOK_KERNELS must be 'default' or a kernel rules file "
                               f"(audiotok bench --kernels --save writes one), got {kernels!r}")


for command in (encode, decode, reconstruct, voice, bench, tokenize, eval_command, export, info,
                serve):
    main.add_command(command)

__all__ = ["main"]
