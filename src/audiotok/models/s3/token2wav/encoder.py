"""The flow's token encoder: an upsampling conformer (CosyVoice 2's UpsampleConformerEncoder).

Token embeddings [B, L, 512] -> Linear + LayerNorm, scaled by sqrt(512) -> a pre-lookahead
convolution (each token sees the next `lookahead`) -> conformer layers with relative-position
attention -> nearest x2 upsampling and a causal kernel-5 convolution -> again Linear +
LayerNorm, scaled -> more conformer layers -> LayerNorm: [B, 2L, 512] at the mel rate. Module
and tensor names are the reference's (`flow.encoder.*`), so its checkpoints load as they are."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ....nn.linear import Linear
from .config import FlowConfig


def relative_positions(length: int, width: int, device=None) -> torch.Tensor:
    """[1, 2 length - 1, width] sinusoids of the relative positions length - 1 .. -(length - 1)
    (ESPnet's table: sines on even channels, cosines on odd ones)."""
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]
    rate = torch.exp(torch.arange(0, width, 2, dtype=torch.float32, device=device)
                     * -(math.log(10000.0) / width))

    def table(angle: torch.Tensor) -> torch.Tensor:  # [length, width / 2] -> [length, width]
        return torch.stack([torch.sin(angle), torch.cos(angle)], -1).reshape(length, width)

    ahead, behind = table(position * rate), table(-1 * position * rate)
    return torch.cat([ahead.flip(0), behind[1:]])[None]


def relative_shift(scores: torch.Tensor) -> torch.Tensor:
    """[..., T, 2T - 1] scores against relative positions T - 1 .. -(T - 1) -> [..., T, T]
    against keys: out[i, j] = scores[i, T - 1 - i + j]."""
    t = scores.shape[-2]
    index = (t - 1) - torch.arange(t, device=scores.device)[:, None] \
        + torch.arange(t, device=scores.device)[None, :]
    return scores.gather(-1, index.expand(*scores.shape[:-1], t))


class RelPositionAttention(nn.Module):
    """Self-attention with Transformer-XL relative positions: scores
    ((q + u) k^T + shift((q + v) p^T)) / sqrt(d) per head of d = width / heads channels (64
    in the released model), padded keys masked."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads, self.dim = heads, width // heads
        self.linear_q, self.linear_k = Linear(width, width), Linear(width, width)
        self.linear_v, self.linear_out = Linear(width, width), Linear(width, width)
        self.linear_pos = Linear(width, width, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(heads, self.dim))
        self.pos_bias_v = nn.Parameter(torch.zeros(heads, self.dim))

    def forward(self, x: torch.Tensor, pos: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """x [B, T, C]; pos [1, 2T - 1, C]; keep [B, 1 or T, T] True where a query may attend."""
        b, t, c = x.shape
        h, d = self.heads, self.dim
        q = self.linear_q(x).view(b, t, h, d)
        k = self.linear_k(x).view(b, t, h, d).transpose(1, 2)
        v = self.linear_v(x).view(b, t, h, d).transpose(1, 2)
        p = self.linear_pos(pos).view(1, -1, h, d).transpose(1, 2)
        content = (q + self.pos_bias_u).transpose(1, 2) @ k.transpose(-2, -1)
        position = relative_shift((q + self.pos_bias_v).transpose(1, 2) @ p.transpose(-2, -1))
        scores = (content + position) / math.sqrt(d)
        masked = ~keep[:, None]
        weights = scores.masked_fill(masked, -float("inf")).softmax(-1).masked_fill(masked, 0.0)
        return self.linear_out((weights @ v).transpose(1, 2).reshape(b, t, c))


class FeedForward(nn.Module):
    def __init__(self, width: int, units: int):
        super().__init__()
        self.w_1, self.w_2 = Linear(width, units), Linear(units, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(F.silu(self.w_1(x)))


class ConformerLayer(nn.Module):
    """x + attention(LN(x)), then x + feed-forward(LN(x)) (LayerNorm eps 1e-12; no convolution
    module, no macaron feed-forward in this model)."""

    def __init__(self, cfg: FlowConfig):
        super().__init__()
        self.self_attn = RelPositionAttention(cfg.width, cfg.heads)
        self.feed_forward = FeedForward(cfg.width, cfg.linear_units)
        self.norm_mha = nn.LayerNorm(cfg.width, eps=1e-12)
        self.norm_ff = nn.LayerNorm(cfg.width, eps=1e-12)

    def forward(self, x, pos, keep):
        x = x + self.self_attn(self.norm_mha(x), pos, keep)
        return x + self.feed_forward(self.norm_ff(x))


class LinearEmbed(nn.Module):
    """Linear + LayerNorm (eps 1e-5), then x sqrt(width) (`out.0`, `out.1`)."""

    def __init__(self, width: int):
        super().__init__()
        self.out = nn.Sequential(Linear(width, width), nn.LayerNorm(width, eps=1e-5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x) * math.sqrt(x.shape[-1])


class PreLookahead(nn.Module):
    """x + conv3(pad_left 2(leaky_relu(conv(lookahead + 1)(pad_right lookahead(x))))): each
    frame sees `lookahead` frames ahead (zeros past the end, or the `context` frames that
    follow)."""

    def __init__(self, width: int, lookahead: int):
        super().__init__()
        self.lookahead = lookahead
        self.conv1 = nn.Conv1d(width, width, lookahead + 1)
        self.conv2 = nn.Conv1d(width, width, 3)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                lengths: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, T, C] (zero past each item's end), context [B, lookahead, C] or None (zeros):
        the frames that follow each item, right after its `lengths` (default T) -> [B, T, C]."""
        h = F.pad(x, (0, 0, 0, self.lookahead))
        if context is not None:
            ends = torch.full((x.shape[0],), x.shape[1], device=x.device) if lengths is None \
                else lengths
            at = ends[:, None] + torch.arange(self.lookahead, device=x.device)
            h = h.scatter(1, at[..., None].expand(-1, -1, x.shape[-1]), context.to(h.dtype))
        h = F.pad(F.leaky_relu(self.conv1(h.transpose(1, 2))), (2, 0))
        return self.conv2(h).transpose(1, 2) + x


class Upsample(nn.Module):
    """Nearest x2 along time, then a causal kernel-5 convolution (4 zeros on the left)."""

    def __init__(self, width: int, stride: int = 2):
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv1d(width, width, 2 * stride + 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, C, T] -> [B, C, 2T]."""
        x = F.interpolate(x, scale_factor=float(self.stride), mode="nearest")
        return self.conv(F.pad(x, (2 * self.stride, 0)))


class UpsampleConformerEncoder(nn.Module):
    def __init__(self, cfg: FlowConfig):
        super().__init__()
        self.embed = LinearEmbed(cfg.width)
        self.pre_lookahead_layer = PreLookahead(cfg.width, cfg.lookahead)
        self.encoders = nn.ModuleList(ConformerLayer(cfg) for _ in range(cfg.blocks))
        self.up_layer = Upsample(cfg.width)
        self.up_embed = LinearEmbed(cfg.width)
        self.up_encoders = nn.ModuleList(ConformerLayer(cfg) for _ in range(cfg.up_blocks))
        self.after_norm = nn.LayerNorm(cfg.width, eps=1e-5)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, chunk: int = 0,
                context: torch.Tensor | None = None) -> torch.Tensor:
        """Embedded tokens x [B, L, 512] (zero past each length) -> [B, 2L, 512]. chunk > 0:
        CosyVoice 2's streaming mode, attention within chunks of `chunk` tokens and those
        before (2 chunk frames after upsampling); context: the embedded tokens that follow each item
        ([B, lookahead, 512], a stream's), seen by the pre-lookahead convolution only."""
        keep = _keep(lengths, x.shape[1])
        x = self.embed(x) * keep.transpose(1, 2)  # (past an item's end: zeros, as alone)
        x = self.pre_lookahead_layer(x, None if context is None else self.embed(context), lengths)
        pos = relative_positions(x.shape[1], x.shape[-1], x.device).to(x.dtype)
        keep = chunked(keep, chunk)
        for layer in self.encoders:
            x = layer(x, pos, keep)
        x = self.up_layer(x.transpose(1, 2)).transpose(1, 2)
        keep = chunked(_keep(2 * lengths, x.shape[1]), 2 * chunk)
        x = self.up_embed(x)
        pos = relative_positions(x.shape[1], x.shape[-1], x.device).to(x.dtype)
        for layer in self.up_encoders:
            x = layer(x, pos, keep)
        return self.after_norm(x)


def _keep(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, 1, width] True inside each item."""
    return (torch.arange(width, device=lengths.device)[None] < lengths[:, None])[:, None]


def chunked(keep: torch.Tensor, chunk: int) -> torch.Tensor:
    """keep [B, 1, T] -> [B, T, T]: query i may attend key j inside the item and in i's chunk
    of `chunk` frames or before it (chunk 0: keep as it is, every key)."""
    if not chunk:
        return keep
    i = torch.arange(keep.shape[-1], device=keep.device)
    return keep & (i[None, :] < (i[:, None] // chunk + 1) * chunk)[None]
