"""Pre-norm causal transformer with interleaved RoPE and window-limited attention.

The config picks the variant a codec was trained with: RMSNorm and a SwiGLU MLP with a final
norm and a bfloat16-rounded RoPE table, or LayerNorm and a GELU MLP, no final norm and a
float32 table.

The attention never materialises a T x T mask: queries are processed in blocks of `window`
positions, each attending to at most the `window` keys ending at itself, so memory and time grow
linearly with the sequence length. Streaming (see streaming.py) keeps each row's absolute
position, which RoPE continues, and per layer a ring of keys and values (KVRing below).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .kernels import few_queries, few_query_attention, packed_weights
from .linear import Linear
from .streaming import LayerState, StreamingModule
from .tracing import exporting

UNBOUNDED = 1 << 20  # a window no input reaches: every earlier position is attended to


@dataclass(frozen=True)
class TransformerConfig:
    dim: int
    n_layer: int
    n_head: int
    head_dim: int
    intermediate_size: int
    window: int
    n_local_heads: int = -1
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    norm: str = "rms"  # "rms" (RMSNorm) or "layer" (LayerNorm with bias)
    mlp: str = "swiglu"  # "swiglu" (w2(silu(w1 x) * w3 x)) or "gelu" (w2(gelu(w1 x)), exact erf)
    final_norm: bool = True  # a norm after the last block
    rope_dtype: str = "bfloat16"  # the RoPE table's rounding: "bfloat16", "float32", "hf"

    @property
    def kv_heads(self) -> int:
        return self.n_head if self.n_local_heads < 1 else self.n_local_heads


def rope_table(positions: torch.Tensor, head_dim: int, base: float,
               dtype: str = "bfloat16") -> torch.Tensor:
    """cos/sin of interleaved RoPE pairs, [*positions.shape, head_dim // 2, 2].

    "bfloat16": rounded to bfloat16 (codecs trained with such a table need that rounding
    reproduced for parity; the values promote to float32 in the rotation), frequencies
    1 / base^(2j/D). "float32": frequencies exp(-ln(base) 2j / D) and cos/sin in float32. "hf":
    transformers' default RoPE, frequencies 1 / base^(2j/D) and cos/sin in float32.
    """
    if dtype == "float32":
        j = torch.arange(head_dim // 2, device=positions.device, dtype=torch.float32)
        freqs = torch.exp(j * (-math.log(base) * 2 / head_dim))
    else:  # "bfloat16" and "hf": 1 / base^(2j/D)
        half = head_dim // 2
        freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=positions.device)[:half]
                                .float() / head_dim))
    angles = positions[..., None].float() * freqs
    if dtype != "bfloat16":
        return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)
    cis = torch.polar(torch.ones_like(angles), angles)
    return torch.stack([cis.real, cis.imag], dim=-1).to(torch.bfloat16)


def apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs (2i, 2i+1) of x [B, T, H, D] by the angles in table [T, D/2, 2]
    (shared by the rows) or [B, T, D/2, 2] (per row)."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    t = table.view(-1, xs.shape[1], 1, xs.shape[3], 2)
    x0, x1 = xs[..., 0], xs[..., 1]
    c, s = t[..., 0], t[..., 1]
    out = torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1)
    return out.flatten(3).type_as(x)


def window_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int) -> torch.Tensor:
    """Boolean mask [Tq, Tk] for positions [Tq], [Tk], or [B, 1, Tq, Tk] for per-row positions
    [B, Tq], [B, Tk]: query i sees key j iff i - window < j <= i and j >= 0 (a negative
    position is an empty cache entry)."""
    diff = q_pos[..., :, None] - k_pos[..., None, :]
    mask = (diff >= 0) & (diff < window) & (k_pos[..., None, :] >= 0)
    return mask[:, None] if mask.ndim == 3 else mask


def banded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     window: int) -> torch.Tensor:
    """Offline causal attention over the last `window` keys (positions 0..T-1, no cache) in a
    length-independent form: the sequence is padded to blocks of `window` queries, each block
    attends to the keys of itself and the block before it, [B, H, n, W, 2W] at most."""
    b, h, t, d = q.shape
    w = window
    n = (t + w - 1) // w  # blocks (a ceil division: simpler for the exporter than t % w)
    pad = n * w - t
    qb = F.pad(q, (0, 0, 0, pad)).reshape(b, h, n, w, d)
    kp, vp = F.pad(k, (0, 0, w, pad)), F.pad(v, (0, 0, w, pad))  # w empty keys in front
    kb = torch.cat([kp[:, :, : n * w].reshape(b, h, n, w, d),
                    kp[:, :, w:].reshape(b, h, n, w, d)], dim=3)
    vb = torch.cat([vp[:, :, : n * w].reshape(b, h, n, w, d),
                    vp[:, :, w:].reshape(b, h, n, w, d)], dim=3)
    i = torch.arange(w, device=q.device)
    j = torch.arange(2 * w, device=q.device)
    block = torch.arange(n, device=q.device)
    # query block*w + i sees key block*w - w + j iff i < j <= i + w and the key exists (>= 0)
    mask = ((j[None, :] > i[:, None]) & (j[None, :] <= i[:, None] + w))[None] \
        & (block[:, None, None] * w - w + j[None, None, :] >= 0)
    # blocks into the batch (exporters take 4-D attention only): [B * n, H, W | 2W, D]
    def rows(x):
        return x.transpose(1, 2).reshape(b * n, h, x.shape[3], d)

    y = F.scaled_dot_product_attention(rows(qb), rows(kb), rows(vb),
                                       attn_mask=mask.repeat(b, 1, 1)[:, None])
    return y.reshape(b, n, h, w, d).transpose(1, 2).reshape(b, h, n * w, d)[:, :, :t]


def windowed_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor,
    k_pos: torch.Tensor, window: int,
) -> torch.Tensor:
    """Causal attention limited to the last `window` keys, q [B, H, Tq, D], k/v [B, H, Tk, D].

    Positions are [T] or per row [B, T]. Key positions must be increasing and end at the last
    query's (self-attention, possibly with a cached prefix of keys).
    """
    if exporting() and q_pos.ndim == 1 and k_pos is q_pos:  # offline, traced for export
        if window >= UNBOUNDED:  # every earlier position: plain causal attention
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return banded_attention(q, k, v, window)
    tq, tk = q.shape[2], k.shape[2]
    if tq <= window:
        mask = window_mask(q_pos, k_pos, window)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    offset = tk - tq  # number of cached keys before the first query
    blocks = []
    for start in range(0, tq, window):
        stop = min(start + window, tq)
        k_start = max(0, offset + start - window + 1)
        k_stop = offset + stop
        mask = window_mask(q_pos[..., start:stop], k_pos[..., k_start:k_stop], window)
        blocks.append(F.scaled_dot_product_attention(
            q[:, :, start:stop], k[:, :, k_start:k_stop], v[:, :, k_start:k_stop], attn_mask=mask,
        ))
    return torch.cat(blocks, dim=2)


class RMSNorm(nn.Module):
    """RMSNorm computed in float32, cast back to the input dtype, then scaled."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


class LayerScale(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class FeedForward(nn.Module):
    """SwiGLU MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = Linear(dim, hidden, bias=False)
        self.w3 = Linear(dim, hidden, bias=False)
        self.w2 = Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class GeluFeedForward(nn.Module):
    """GELU MLP without biases: w2(gelu(w1 x)), the exact (erf) GELU."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = Linear(dim, hidden, bias=False)
        self.w2 = Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.gelu(self.w1(x)))


def make_norm(cfg: TransformerConfig) -> nn.Module:
    if cfg.norm == "layer":
        return nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
    return RMSNorm(cfg.dim, cfg.norm_eps)


class KVRing:
    """Where a streaming step's keys and values go: per layer a ring of `size` = window - 1 +
    slack slots, slot s holding the key of the newest position p with p mod size = s that the
    row has reached (zeros at negative positions before a stream has that many, masked out).

    A step of t <= slack new positions writes its keys into their slots in place and attends
    over the whole ring. It overwrites only positions that no query of this step or later
    reaches (older than the window), so the ring before the step still holds all that its
    position needs: a failed step leaves the state meaning what it meant (the engine
    retries such a batch stream by stream), with no copy of the cache per step. A row with
    fewer valid steps (Ragged) writes its padding into slots of positions it has not reached,
    which the masks never show and the next steps overwrite first. Longer steps and graph
    export take the functional path: the ring in position order, the new keys after it, and
    a new ring taken from both."""

    def __init__(self, window: int, pos: torch.Tensor, t: int, end: torch.Tensor | None):
        self.window = window
        self.size = size = self.size_for(window)
        self.in_place = not exporting() and t <= size - (window - 1)  # (no guard when traced)
        device = pos.device
        start = pos[:, 0]  # [B]: the step's first position per row
        slots = torch.arange(size, device=device)
        if self.in_place:
            self.write = (pos % size)[:, None, :, None]  # [B, 1, t, 1]
            oldest = start + t - size  # the ring after the write: positions oldest..start+t-1
            self.k_pos = oldest[:, None] + (slots - oldest[:, None]) % size
            self.mask = window_mask(pos, self.k_pos, window)
        else:
            first = start - size  # the ring before the step in position order, then the new
            self.order = ((first[:, None] + slots) % size)[:, None, :, None]
            self.k_pos = first[:, None] + torch.arange(size + t, device=device)
            new_oldest = start + (t if end is None else end) - size
            keep = new_oldest[:, None] + (slots - new_oldest[:, None]) % size
            self.keep = (keep - first[:, None])[:, None, :, None]

    @functools.cached_property
    def bias(self) -> torch.Tensor:
        """The in-place step's mask as 0 / -inf (few_query_attention's form), made once a step
        for every layer."""
        bias = torch.zeros(self.mask.shape, dtype=torch.float32, device=self.mask.device)
        return bias.masked_fill_(~self.mask, float("-inf"))

    @staticmethod
    def size_for(window: int) -> int:
        """window - 1 + slack slots (slack: the most steps written in place)."""
        return window - 1 + max(16, window // 8)

    def attend(self, state: TransformerState, layer: int, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor, pos: torch.Tensor, repeat: int) -> torch.Tensor:
        """Attention of the step's queries q [B, H, t, D] over layer `layer`'s ring and the
        step's keys and values k, v [B, H_kv, t, D] (each kv head serving `repeat` query
        heads); advances the ring in `state`."""
        cache = state.layers[layer]
        keys, values = cache.k, cache.v
        if self.in_place:
            index = self.write.expand(-1, k.shape[1], -1, k.shape[3])
            keys.scatter_(2, index, k)
            values.scatter_(2, index, v)
            k, v = _repeat(keys, repeat), _repeat(values, repeat)
            if few_queries(q, k, v):
                return few_query_attention(q, k, v, self.bias)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
        order = self.order.expand(-1, k.shape[1], -1, k.shape[3])
        k = torch.cat([keys.gather(2, order), k], dim=2)
        v = torch.cat([values.gather(2, order), v], dim=2)
        keep = self.keep.expand(-1, k.shape[1], -1, k.shape[3])
        cache.k, cache.v = k.gather(2, keep), v.gather(2, keep)
        return windowed_attention(q, _repeat(k, repeat), _repeat(v, repeat), pos, self.k_pos,
                                  self.window)


@dataclass
class KVCache(LayerState):
    k: torch.Tensor  # [B, kv heads, ring slots, head_dim] (KVRing)
    v: torch.Tensor


@dataclass
class TransformerState(LayerState):
    position: torch.Tensor  # [B]: the next position of each row
    layers: list[KVCache]


def _repeat(x: torch.Tensor, n: int) -> torch.Tensor:
    return x if n == 1 else x.repeat_interleave(n, dim=1)


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        q_size, kv_size = cfg.n_head * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        self.split = (q_size + kv_size, kv_size)  # queries and keys (rotated), values
        self.wqkv = Linear(cfg.dim, q_size + 2 * kv_size, bias=False)
        self.wo = Linear(q_size, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, pos: torch.Tensor,
                stream: tuple[KVRing, TransformerState, int] | None = None) -> torch.Tensor:
        """stream: the step's ring, the transformer's state and this layer's index in it (None
        offline)."""
        cfg = self.cfg
        b, t, _ = x.shape
        qk, v = self.wqkv(x).split(self.split, dim=-1)
        # queries and keys are rotated alike: one call over their heads side by side
        qk = apply_rope(qk.view(b, t, cfg.n_head + cfg.kv_heads, cfg.head_dim), rope)
        q, k = qk.transpose(1, 2).split((cfg.n_head, cfg.kv_heads), dim=1)
        v = v.view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        repeat = cfg.n_head // cfg.kv_heads
        if stream is not None:
            ring, state, layer = stream
            y = ring.attend(state, layer, q, k, v, pos, repeat)
        else:
            y = windowed_attention(q, _repeat(k, repeat), _repeat(v, repeat), pos, pos,
                                   cfg.window)
        return self.wo(y.transpose(1, 2).reshape(b, t, cfg.n_head * cfg.head_dim))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.attention = Attention(cfg)
        mlp = GeluFeedForward if cfg.mlp == "gelu" else FeedForward
        self.feed_forward = mlp(cfg.dim, cfg.intermediate_size)
        self.attention_norm = make_norm(cfg)
        self.ffn_norm = make_norm(cfg)
        self.attention_layer_scale = LayerScale(cfg.dim)
        self.ffn_layer_scale = LayerScale(cfg.dim)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, pos: torch.Tensor,
                stream: tuple[KVRing, TransformerState, int] | None = None) -> torch.Tensor:
        h = x + self.attention_layer_scale(
            self.attention(self.attention_norm(x), rope, pos, stream))
        return h + self.ffn_layer_scale(self.feed_forward(self.ffn_norm(h)))


class WindowedTransformer(StreamingModule):
    """Stack of causal window-limited blocks (and a final norm if the config has one);
    channels-first [B, C, T] in/out.

    Offline, positions are 0..T-1 on each call, as in the reference; streaming, they continue.
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layer))
        self.norm = make_norm(cfg) if cfg.final_norm else nn.Identity()

    def new_state(self, batch: int, device: torch.device) -> TransformerState:
        cfg, w = self.cfg, self.layers[0].attention.wqkv.weight
        shape = (batch, cfg.kv_heads, KVRing.size_for(cfg.window), cfg.head_dim)
        return TransformerState(
            torch.zeros(batch, dtype=torch.long, device=device),
            [KVCache(torch.zeros(shape, device=device, dtype=w.dtype),
                     torch.zeros(shape, device=device, dtype=w.dtype)) for _ in self.layers])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)
        b, t = x.shape[:2]
        steps = torch.arange(t, device=x.device)
        if not self.streaming:
            rope = rope_table(steps, self.cfg.head_dim, self.cfg.rope_base, self.cfg.rope_dtype)
            for layer in self.layers:
                x = layer(x, rope, steps)
            return self.norm(x).transpose(1, 2)
        state = self.current_state(b, x.device)
        end = None if self.ragged is None else self.ragged.valid(t)
        pos = state.position[:, None] + steps  # [B, t]
        ring = KVRing(self.cfg.window, pos, t, end)
        state.position = state.position + (t if end is None else end)
        rope = rope_table(pos, self.cfg.head_dim, self.cfg.rope_base, self.cfg.rope_dtype)
        with packed_weights():  # a streaming step's few-row products (kernels)
            for i, layer in enumerate(self.layers):
                x = layer(x, rope, pos, (ring, state, i))
        return self.norm(x).transpose(1, 2)
