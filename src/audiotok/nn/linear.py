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

The sums are the same; only the order of float additions differs (results within rounding).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .tracing import exporting

FEW_ROWS = 64
_ONEDNN = {"ok": hasattr(torch.ops.mkldnn, "_linear_pointwise")
           and torch.backends.mkldnn.is_available()}


class Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) computed by `linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
           ) -> torch.Tensor:
    if exporting():  # (before any test of the rows: a traced size would be guarded on it)
        return F.linear(x, weight, bias)
    rows = x.numel() // max(x.shape[-1], 1)
    if (rows > FEW_ROWS or rows == 0 or x.device.type != "cpu" or x.dtype != torch.float32
            or weight.dtype != torch.float32
            or (torch.is_grad_enabled()
                and any(t is not None and t.requires_grad for t in (x, weight, bias)))):
        return F.linear(x, weight, bias)
    if rows == 2:
        return F.linear(x, weight, bias)
    if rows == 1 and _ONEDNN["ok"]:
        try:
            return _onednn_linear(x, weight, bias)
        except RuntimeError:  # a build or CPU without it: the general path from now on
            _ONEDNN["ok"] = False
    # x row-major, so that x^T is a column-major operand (MKL's fast layout for few columns)
    y = (weight @ x.reshape(rows, x.shape[-1]).contiguous().t()).t().contiguous()
    if bias is not None:
        y += bias
    return y.view(*x.shape[:-1], weight.shape[0])


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
                   ) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
