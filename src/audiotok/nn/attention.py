"""Full (non-causal) attention, fast on long float32 CPU inputs where MKL lacks its fast kernels.

`F.scaled_dot_product_attention`'s CPU kernel (flash attention) runs its products at about 190
GFLOP/s on a 2-core AMD EPYC (torch 2.13): over 3000 steps, 16 heads of 64, one layer took
0.19 s, half of a 60 s decode by a 12-layer transformer decoder at 50 steps/s. Under the oneDNN
rule (nn/linear.py), each head and each chunk of QUERY_CHUNK queries runs instead as two oneDNN
products around a softmax: 0.13 s for the same layer, results within 3e-8 of the kernel's.
Elsewhere (the MKL rule, other dtypes or devices, autograd, graph export, short inputs) the
kernel runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .linear import cpu_float32, gemm_backend, onednn_product
from .tracing import exporting

QUERY_CHUNK = 512  # queries a product takes (512 x 3000 scores: 6 MB; 1024 ran 2x slower)
LONG_KEYS = 256  # from this many keys on the chunked form runs


def full_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v over the keys `key_mask` keeps (bool [B, T], True: attend;
    None: all) for q, k, v [B, H, T, D]; [B, H, T, D] out (a view of a [B, T, H, D] tensor
    when chunked, so that merging the heads costs no copy)."""
    if not _chunked(q, k, v):
        mask = None if key_mask is None else key_mask[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    b, heads, t, d = q.shape
    out = q.new_empty(b, t, heads, d)
    for i in range(b):
        hidden = None if key_mask is None else ~key_mask[i]
        for h in range(heads):
            keys, values = k[i, h].contiguous(), v[i, h].t().contiguous()
            queries = q[i, h] * d ** -0.5
            for s in range(0, t, QUERY_CHUNK):
                scores = onednn_product(queries[s : s + QUERY_CHUNK], keys)
                if scores is None:  # oneDNN failed (and is off from now on): the kernel
                    return full_attention(q, k, v, key_mask)
                if hidden is not None:
                    scores.masked_fill_(hidden, float("-inf"))
                out[i, s : s + QUERY_CHUNK, h] = onednn_product(torch.softmax(scores, -1),
                                                                values)
    return out.transpose(1, 2)


def _chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    return k.shape[-2] >= LONG_KEYS and _onednn_float32(q, k, v)


def _onednn_float32(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """float32 CPU operands under the oneDNN rule (nn/linear.py), outside export and autograd:
    where the product forms below replace the SDPA kernel."""
    return (not exporting() and gemm_backend() == "onednn" and cpu_float32(q, k, v)
            and v.dtype == torch.float32)


def few_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        bias: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(D) + bias) v for a streaming step's queries q [B, H, t, D] over a
    cache k, v [B, H, S, D] (bias [B, 1, t, S]: 0 where a query sees a key, -inf elsewhere), as
    two batched products around a softmax. From 2 query rows on (batch x t) the SDPA kernel
    took 1.1-1.5x its time on a 2-core AMD EPYC (torch 2.13, 8 layers' caches in turn: batch 8,
    2 queries, 280 keys, 8 heads of 64: 356 against 249 us); on one row the kernel is the
    faster, and few_queries() keeps it there."""
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(q.shape[-1] ** -0.5).add_(bias)
    return torch.matmul(torch.softmax(scores, -1), v)


def few_queries(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether a streaming step's attention runs as few_query_attention: float32 CPU under the
    oneDNN rule (nn/linear.py), 2 query rows or more, outside export and autograd."""
    return q.shape[0] * q.shape[2] >= 2 and _onednn_float32(q, k, v)
