"""Matrix products x @ W^T in the form that is fast on this CPU (ruleset.py; docs/performance.md).

In float32 on the CPU, outside autograd and graph export:

- one row: oneDNN's linear on the dense weight (both threads);
- 2..few_rows rows in a streaming step under the oneDNN rule with `packed`: oneDNN's linear
  on a copy of the weight in its blocked layout, made on first use (derivations.py);
- `onednn_rows` rows and more under the oneDNN rule: oneDNN's linear;
- two rows under the MKL rule, and past `few_rows`: F.linear;
- otherwise W @ x^T with x row-major (MKL's fast layout for few columns), transposed back.

Everything else (other dtypes or devices, autograd, export) is F.linear.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..tracing import exporting
from .derivations import derived
from .ruleset import onednn_available, rules

PACK_ROWS = 16  # the row count oneDNN's blocked copy is laid out for (2, 16 and 64 alike)
_ONEDNN = {"ok": onednn_available(),
           "packed": hasattr(torch.ops.mkldnn, "_reorder_linear_weight")}
# True: pack; False: an outer caller ruled it out; None: not asked
_PACKING = contextvars.ContextVar("audiotok_packed_weights", default=None)


@contextlib.contextmanager
def packed_weights(on: bool = True) -> Iterator[None]:
    """Within (this thread or task): a streaming step's few-row products may use packed weight
    copies (when the rules say so). packed_weights(False): no step within packs (an offline
    call that runs a stream in pieces, whose short last piece would otherwise make the
    copies)."""
    token = _PACKING.set(on and _PACKING.get() is not False)
    try:
        yield
    finally:
        _PACKING.reset(token)


def onednn_rule() -> bool:
    """Whether float32 products follow the oneDNN rule here (and oneDNN still works)."""
    return rules().products == "onednn" and _ONEDNN["ok"]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           source: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight^T (+ bias). source: the parameter (or derived tensor) that `weight` is a view
    of, which keys its packed copy; by default weight itself if it is a parameter (a temporary
    weight is never packed)."""
    if exporting():  # (before any test of the rows: a traced size would be guarded on it)
        return F.linear(x, weight, bias)
    rows = x.numel() // max(x.shape[-1], 1)
    if rows == 0 or not cpu_float32(x, weight, bias):
        return F.linear(x, weight, bias)
    r, onednn = rules(), onednn_rule()
    if source is None and isinstance(weight, nn.Parameter):
        source = weight
    if onednn and r.packed and 1 < rows <= r.few_rows and source is not None and \
            _PACKING.get():
        y = _packed_or_none(x, weight, bias, source)
        if y is not None:
            return y
    if rows == 1 or (onednn and rows >= r.onednn_rows):
        y = _onednn_or_none(x, weight, bias)
        if y is not None:
            return y
    if rows > r.few_rows or (rows == 2 and not onednn):
        return F.linear(x, weight, bias)
    y = (weight @ x.reshape(rows, x.shape[-1]).contiguous().t()).t().contiguous()
    if bias is not None:
        y += bias
    return y.view(*x.shape[:-1], weight.shape[0])


def rule_product(x: torch.Tensor, weight: torch.Tensor, reference: Callable[[], torch.Tensor],
                 min_rows: int | None = None) -> torch.Tensor:
    """x @ weight^T [N, M] for x [N, D] by oneDNN under the oneDNN rule (from `min_rows` rows
    on; default the rules' onednn_rows), else `reference()`: the reference implementation's own
    call, whose rounding decides a codebook search's near-ties (float32 CPU operands only)."""
    rows = rules().onednn_rows if min_rows is None else min_rows
    if (exporting() or x.shape[0] < rows or x.numel() == 0 or not onednn_rule()
            or not cpu_float32(x, weight, None)):
        return reference()
    y = _onednn_or_none(x, weight, None)
    return reference() if y is None else y


def onednn_product(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor | None:
    """x @ weight^T by oneDNN (any rows), or None where oneDNN fails."""
    return _onednn_or_none(x, weight, None)


def cpu_float32(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Float32 operands on the CPU, outside autograd: where the fast forms apply."""
    return (x.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32
            and not (torch.is_grad_enabled()
                     and any(t is not None and t.requires_grad for t in (x, weight, bias))))


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
                  ) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def _onednn_or_none(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
                    ) -> torch.Tensor | None:
    if not _ONEDNN["ok"]:
        return None
    try:
        return onednn_linear(x, weight, bias)
    except RuntimeError:  # a build or CPU without it: the other forms from now on
        _ONEDNN["ok"] = False
        return None


def _packed_or_none(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    source: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's linear on the packed copy of weight (made once per state of `source`)."""
    if not (_ONEDNN["ok"] and _ONEDNN["packed"]):
        return None
    try:
        return onednn_linear(x, derived(source, "onednn packed", lambda _: pack(weight)), bias)
    except RuntimeError:  # a build without it: the dense forms from now on
        _ONEDNN["packed"] = False
        return None


def pack(weight: torch.Tensor) -> torch.Tensor:
    """weight in oneDNN's blocked layout for PACK_ROWS-row products."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), PACK_ROWS)
