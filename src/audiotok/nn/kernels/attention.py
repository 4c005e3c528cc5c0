"""Attention in the form that is fast on this CPU: under the oneDNN rule (ruleset.py), full
attention over long inputs as two oneDNN products per head and chunk of queries around a
softmax, and a streaming step's few queries as two batched products; elsewhere (the MKL rule,
other dtypes or devices, autograd, graph export, short inputs) the SDPA kernel
(docs/performance.md, kernel rules).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..tracing import exporting
from .products import cpu_float32, onednn_product, onednn_rule
from .ruleset import rules


def full_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v over the keys `key_mask` keeps (bool [B, T], True: attend;
    None: all) for q, k, v [B, H, T, D]; [B, H, T, D] out (a view of a [B, T, H, D] tensor
    when chunked, so that merging the heads costs no copy)."""
    # (the length is compared last: in a traced graph the comparison would bound it)
    if not (_onednn_float32(q, k, v) and k.shape[-2] >= rules().long_keys):
        mask = None if key_mask is None else key_mask[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    chunk = rules().query_chunk
    b, heads, t, d = q.shape
    out = q.new_empty(b, t, heads, d)
    for i in range(b):
        hidden = None if key_mask is None else ~key_mask[i]
        for h in range(heads):
            keys, values = k[i, h].contiguous(), v[i, h].t().contiguous()
            queries = q[i, h] * d ** -0.5
            for s in range(0, t, chunk):
                scores = onednn_product(queries[s : s + chunk], keys)
                if scores is None:  # oneDNN failed (and is off from now on): the kernel
                    return full_attention(q, k, v, key_mask)
                if hidden is not None:
                    scores.masked_fill_(hidden, float("-inf"))
                out[i, s : s + chunk, h] = onednn_product(torch.softmax(scores, -1), values)
    return out.transpose(1, 2)


def few_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        bias: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(D) + bias) v for a streaming step's queries q [B, H, t, D] over a
    cache k, v [B, H, S, D] (bias [B, 1, t, S]: 0 where a query sees a key, -inf elsewhere)."""
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(q.shape[-1] ** -0.5).add_(bias)
    return torch.matmul(torch.softmax(scores, -1), v)


def few_queries(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether a streaming step's attention runs as few_query_attention (two products: the
    oneDNN rule, 2 query rows or more) rather than the SDPA kernel."""
    return q.shape[0] * q.shape[2] >= 2 and _onednn_float32(q, k, v)


def _onednn_float32(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """float32 CPU operands under the oneDNN rule, outside export and autograd."""
    return (not exporting() and onednn_rule() and cpu_float32(q, k, v)
            and v.dtype == torch.float32)
