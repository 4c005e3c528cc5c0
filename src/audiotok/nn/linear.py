"""Linear layers with a CPU fast path for few rows (a streaming push: one to a few frames per
stream).

On few rows a float32 `F.linear` (x @ W^T through MKL) is bound by reading the weight, and reads
it slowly: a single row runs on one thread, and at 4 rows it takes 1.8-4.8x longer than the same
product written as W @ x^T (a 2-core AMD EPYC, torch 2.13: `benchmarks/few_rows.py` per shape,
`benchmarks/serve_engine.py` on a whole push). So, in float32 on the CPU:

- one row: oneDNN's linear on the dense weight (both threads, no repacked copy kept);
- two rows (a one-frame push of a codec whose transformer runs at twice the frame rate):
  `F.linear`, which on an Intel Xeon (torch 2.13, 2 threads) takes 0.40-0.66x the time of
  W @ x^T at widths 512-2048 (`benchmarks/few_rows.py --rows 1,2,4,16 --shapes ...`): the
  column-major forms run a two-column product on one thread there;
- 2..FEW_ROWS rows: W @ x^T with x row-major (x^T column-major: with a row-major right operand
  of 4 columns the same product takes 1.6-2.3x longer), transposed back to a contiguous result;
- more rows, other dtypes or devices, autograd, graph export: `F.linear`.

On CPUs not made by Intel (an AMD EPYC here) MKL runs its generic kernels, not its AVX-512
ones: its float32 products take about twice oneDNN's time from 8 rows on (2-core AMD EPYC,
torch 2.13: 200 against 350-470 GFLOP/s at 64-1500 rows, `benchmarks/few_rows.py --rows
2,4,8,16,32,64,128 --shapes 1536x512,512x512,2048x512,512x2048`). There, from 8 rows on, every
float32 product goes to oneDNN's linear, and 2-7 rows take W @ x^T (its 2-row form is 1.3-1.9x
faster than F.linear there). `gemm_backend()` says which rule runs; the environment variable
AUDIOTOK_CPU_GEMM=onednn|mkl overrides the choice (side-by-side measurements, tests).

Under the oneDNN rule a streaming step (`packed_weights()`: the streaming transformer and
causal convolutions enter it) runs its products of 2..FEW_ROWS rows on a copy of each weight
in oneDNN's blocked layout, made on first use and kept beside the weight (nn/derived.py): one
more copy of the weights a stream uses. On a 2-core AMD EPYC (torch 2.13, `python
benchmarks/few_rows.py --threads 2 --rows 2,4,8,16,64 --prepacked --shapes
1536x512,512x512,2048x512,512x2048,1024x3584,4096x2048`: a 24 kHz codec's push shapes, the
weights not in cache) that took 0.26-0.67x the time of W @ x^T at 2-4 rows (weights read at
up to 110 GB/s, where a plain sum read 93) and 0.45-0.80x that of the dense oneDNN linear at
8-64 rows, whose sums it gives bit for bit. On an Intel Xeon, where MKL's few-row forms run, a
copy packed for 4 rows was no faster (docs/serving-performance.md), so the MKL rule packs
nothing.

The sums are the same; only the order of float additions differs (results within rounding).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .derived import derived
from .tracing import exporting

FEW_ROWS = 64
ONEDNN_ROWS = 8  # with the oneDNN rule: from this many rows on, oneDNN's linear
_ONEDNN = {"ok": hasattr(torch.ops.mkldnn, "_linear_pointwise")
           and torch.backends.mkldnn.is_available(),
           "packed": hasattr(torch.ops.mkldnn, "_reorder_linear_weight")}
PACK_ROWS = 16  # the row count oneDNN's blocked copy is laid out for (2, 16 and 64 measured alike)
# True: pack; False: an outer caller ruled it out; None: not asked
_PACKING = contextvars.ContextVar("audiotok_packed_weights", default=None)


@contextlib.contextmanager
def packed_weights(on: bool = True) -> Iterator[None]:
    """Within (this thread or task): few-row float32 products under the oneDNN rule use a
    packed copy of their weight (see above); a streaming step's layers enter it.
    packed_weights(False): no step within packs (an offline call that runs a stream in pieces,
    whose short last piece would otherwise make the copies)."""
    token = _PACKING.set(on and _PACKING.get() is not False)
    try:
        yield
    finally:
        _PACKING.reset(token)


class Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) computed by `linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           source: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight^T (+ bias). source: the parameter (or nn/derived.py tensor) that `weight` is
    a view of, which keys its packed copy inside packed_weights(); by default weight itself if
    it is a parameter (a temporary weight is never packed)."""
    if exporting():  # (before any test of the rows: a traced size would be guarded on it)
        return F.linear(x, weight, bias)
    rows = x.numel() // max(x.shape[-1], 1)
    if rows == 0 or not cpu_float32(x, weight, bias):
        return F.linear(x, weight, bias)
    onednn = gemm_backend() == "onednn"
    if source is None and isinstance(weight, nn.Parameter):
        source = weight
    if onednn and 1 < rows <= FEW_ROWS and source is not None and _PACKING.get():
        y = _packed_or_none(x, weight, bias, source)
        if y is not None:
            return y
    if rows == 1 or (onednn and rows >= ONEDNN_ROWS):
        y = _onednn_or_none(x, weight, bias)
        if y is not None:
            return y
    if rows > FEW_ROWS or (rows == 2 and not onednn):
        return F.linear(x, weight, bias)
    # x row-major, so that x^T is a column-major operand (MKL's fast layout for few columns)
    y = (weight @ x.reshape(rows, x.shape[-1]).contiguous().t()).t().contiguous()
    if bias is not None:
        y += bias
    return y.view(*x.shape[:-1], weight.shape[0])


def onednn_product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
                   ) -> torch.Tensor | None:
    """x @ weight^T (+ bias) by oneDNN where the oneDNN rule holds (gemm_backend) for float32
    CPU operands (any number of rows: for a product that would otherwise be MKL's own, oneDNN's
    is the faster there from one row on); None otherwise, for the caller's own form (a product
    that must stay the references' own call under the MKL rule)."""
    if (exporting() or x.numel() == 0 or gemm_backend() != "onednn"
            or not cpu_float32(x, weight, bias)):
        return None
    return _onednn_or_none(x, weight, bias)


def cpu_float32(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Float32 operands on the CPU, outside autograd: where the fast forms apply."""
    return (x.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32
            and not (torch.is_grad_enabled()
                     and any(t is not None and t.requires_grad for t in (x, weight, bias))))


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
                   ) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def _onednn_or_none(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
                    ) -> torch.Tensor | None:
    if not _ONEDNN["ok"]:
        return None
    try:
        return _onednn_linear(x, weight, bias)
    except RuntimeError:  # a build or CPU without it: the other paths from now on
        _ONEDNN["ok"] = False
        gemm_backend.cache_clear()
        return None


def _packed_or_none(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    source: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's linear on the packed copy of weight (made once per state of `source`)."""
    if not (_ONEDNN["ok"] and _ONEDNN["packed"]):
        return None
    try:
        return _onednn_linear(x, derived(source, "onednn packed", lambda _: _pack(weight)), bias)
    except RuntimeError:  # a build without it: the dense forms from now on
        _ONEDNN["packed"] = False
        return None


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), PACK_ROWS)


@functools.cache
def gemm_backend() -> str:
    """The rule float32 CPU products follow: "onednn" (oneDNN's linear from ONEDNN_ROWS rows
    on) where MKL lacks its fast kernels, i.e. on x86 CPUs not made by Intel, else "mkl" (MKL,
    with the few-row forms above). AUDIOTOK_CPU_GEMM=onednn|mkl overrides it."""
    chosen = os.environ.get("AUDIOTOK_CPU_GEMM", "").strip().lower()
    if chosen not in ("", "onednn", "mkl"):
        raise ValueError(f"AUDIOTOK_CPU_GEMM must be onednn or mkl, got {chosen!r}")
    if not _ONEDNN["ok"]:
        return "mkl"
    return chosen or ("onednn" if _cpu_vendor() not in ("GenuineIntel", "") else "mkl")


def _cpu_vendor() -> str:
    """The x86 vendor string from /proc/cpuinfo ("" where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""
