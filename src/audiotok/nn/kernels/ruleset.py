"""The rules that pick a kernel form for a float32 CPU product or convolution, per CPU.

Each field is one choice, and the benchmark that measures it is named beside it. Which form is
faster depends on the CPU, not only on its maker: MKL runs its fast kernels on Intel CPUs only,
oneDNN uses AVX-512 where the CPU has it, and the row counts at which a form starts to win move
with both. So the rules come, in this order, from:

1. `AUDIOTOK_KERNELS`: `default` (the table below), or the path of a rules file;
2. a calibration of this machine (`audiotok bench --kernels --save`: calibrate.py measures each
   choice here and saves the rules under the user's cache folder, keyed by the CPU, the torch
   version and the thread count);
3. the table below, measured on the CPUs the project has run on (docs/performance.md).

`AUDIOTOK_CPU_GEMM=onednn|mkl` then overrides the product rule alone. All forms compute the same
sums; only the order of float additions differs between them (results within rounding).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

from .cpu import Cpu, this_cpu


@dataclass(frozen=True)
class Rules:
    # "onednn": float32 products of `onednn_rows` rows or more, chunked full attention, a
    # stream step's attention as two products and the VQ searches run on oneDNN; "mkl": on MKL
    # (F.linear, torch.matmul) with its few-row forms (benchmarks/kernels/products.py)
    products: str
    # a streaming step's 2..few_rows-row products run on copies of the weights in oneDNN's
    # blocked layout, under the oneDNN rule (benchmarks/kernels/products.py --prepacked)
    packed: bool
    onednn_rows: int = 8  # under the oneDNN rule: from this many rows, oneDNN's linear
    few_rows: int = 64  # up to this many rows, the few-row forms (W @ x^T, packed weights)
    # up to this many output rows (batch x steps) a float32 convolution without padding of 3
    # taps or more runs as one product over its stacked taps, beyond it conv1d's kernels; of 1
    # or 2 taps (pointwise, a transposed convolution's polyphase form) up to
    # short_narrow_rows (benchmarks/kernels/short_convs.py)
    short_conv_rows: int = 256
    short_narrow_rows: int = 256
    short_conv_rows_reduced: int = 64  # the same for bfloat16 and float16
    # under the MKL rule: from this many rows that product is W @ taps, the taps stored
    # row-major; below, W @ taps^T (benchmarks/kernels/short_convs.py)
    taps_rows: int = 17
    # from this many rows (batch x new frames) a streamed transposed convolution runs oneDNN's
    # transposed kernel over context and piece, below it a polyphase product
    # (benchmarks/kernels/streamed_transposed.py)
    transposed_rows: int = 512
    # up to this many rows a depthwise transposed convolution's polyphase form runs as
    # multiply-adds over its taps (benchmarks/streaming/mimi_steps.py: a push's 512-channel
    # upsampler)
    depthwise_rows: int = 16
    long_keys: int = 256  # under the oneDNN rule: from this many keys, attention in chunks
    query_chunk: int = 512  # queries per chunk (512 x 3000 scores: 6 MB)
    source: str = "default"  # where these rules came from (a CPU class, a calibration file)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Rules:
        known = {f.name for f in fields(cls)}
        rules = cls(**{k: v for k, v in d.items() if k in known})
        if rules.products not in ("onednn", "mkl"):
            raise ValueError(f"rules: products must be onednn or mkl, got {rules.products!r}")
        return rules


# Measured on the CPUs the project has run on (2 threads; docs/performance.md, kernel rules).
INTEL = Rules("mkl", packed=False, source="default: Intel (MKL's AVX-512 kernels)")
AMD_AVX512 = Rules("onednn", packed=True, source="default: AMD with AVX-512 (EPYC Zen 4)")
AMD_AVX2 = Rules("onednn", packed=True,
                 source="default: AMD with AVX2 only (EPYC Zen 3)")


def default_rules(cpu: Cpu) -> Rules:
    """The table's rules for `cpu` (the oneDNN rule needs oneDNN's linear in this torch)."""
    if cpu.vendor in ("GenuineIntel", "") or not onednn_available():
        return INTEL if cpu.vendor == "GenuineIntel" else replace(
            INTEL, source=f"default: {cpu.vendor or 'no x86 vendor'}, MKL's kernels")
    return AMD_AVX512 if cpu.avx512 else AMD_AVX2


def onednn_available() -> bool:
    return hasattr(torch.ops.mkldnn, "_linear_pointwise") and \
        torch.backends.mkldnn.is_available()


def calibration_file(cpu: Cpu | None = None, threads: int | None = None) -> Path:
    """Where this machine's calibrated rules are kept (per CPU, torch version, threads)."""
    cpu = cpu or this_cpu()
    threads = threads or torch.get_num_threads()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "audiotok"
    version = torch.__version__.split("+")[0]
    return base / f"kernels-{cpu.key()}-torch{version}-{threads}t.json"


_RULES: list[Rules] = []  # the rules in force (computed on first use)
_OVERRIDES: list[Rules] = []  # use_rules() blocks, innermost last


def rules() -> Rules:
    """The rules in force (see the module docstring)."""
    if _OVERRIDES:
        return _OVERRIDES[-1]
    if not _RULES:
        _RULES.append(_resolve())
    return _RULES[0]


def reset() -> None:
    """Resolve the rules again on next use (after the environment or the files changed)."""
    _RULES.clear()


@contextlib.contextmanager
def use_rules(base: Rules | None = None, **changes) -> Iterator[Rules]:
    """Within the block (every thread), `base` (default: the rules in force) with `changes`."""
    chosen = replace(base or rules(), **changes)
    _OVERRIDES.append(chosen)
    try:
        yield chosen
    finally:
        _OVERRIDES.remove(chosen)


def product_override() -> str:
    """AUDIOTOK_CPU_GEMM, checked: "onednn", "mkl" or "" (none)."""
    chosen = os.environ.get("AUDIOTOK_CPU_GEMM", "").strip().lower()
    if chosen not in ("", "onednn", "mkl"):
        raise ValueError(f"AUDIOTOK_CPU_GEMM must be onednn or mkl, got {chosen!r}")
    return chosen


def _resolve() -> Rules:
    chosen = os.environ.get("AUDIOTOK_KERNELS", "").strip()
    if chosen and chosen != "default":
        found = read_rules(Path(chosen))
    else:
        found = None if chosen == "default" else _calibrated()
    found = found or default_rules(this_cpu())
    products = product_override()
    if products and products != found.products:
        found = replace(found, products=products, source=f"{found.source}; AUDIOTOK_CPU_GEMM")
    if found.products == "onednn" and not onednn_available():
        found = replace(found, products="mkl", source=f"{found.source}; no oneDNN linear")
    return found


def _calibrated() -> Rules | None:
    path = calibration_file()
    return read_rules(path) if path.is_file() else None


def read_rules(path: Path) -> Rules:
    """Rules from a file calibrate.py wrote; ValueError naming the file if it is not one."""
    try:
        doc = json.loads(path.read_text())
        return Rules.from_dict({**doc["rules"], "source": f"calibrated: {path}"})
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a kernel rules file ({e})") from None
