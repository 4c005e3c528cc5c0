"""Wav2Vec2-BERT 2.0 conformer encoder (the first layers of facebook/w2v-bert-2.0), as X-Codec2's
semantic branch uses it: relative-key attention, causal depthwise convolution module."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.linear import Linear
from ...nn.tracing import exporting
from .config import SemanticConfig


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.intermediate_dense = Linear(dim, hidden)
        self.output_dense = Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.silu(self.intermediate_dense(x)))


class ConvModule(nn.Module):
    """LayerNorm, pointwise conv + GLU, causal depthwise conv, LayerNorm, swish, pointwise conv."""

    def __init__(self, cfg: SemanticConfig):
        super().__init__()
        dim = cfg.hidden_size
        self.layer_norm = nn.LayerNorm(dim, eps=cfg.layer_norm_eps)
        self.pointwise_conv1 = nn.Conv1d(dim, 2 * dim, 1, bias=False)
        self.depthwise_conv = nn.Conv1d(dim, dim, cfg.conv_depthwise_kernel_size, groups=dim,
                                        bias=False)
        self.depthwise_layer_norm = nn.LayerNorm(dim, eps=cfg.layer_norm_eps)
        self.pointwise_conv2 = nn.Conv1d(dim, dim, 1, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.layer_norm(x)
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)
        x = F.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)
        x = F.pad(x, (self.depthwise_conv.kernel_size[0] - 1, 0))
        x = self.depthwise_conv(x)
        x = F.silu(self.depthwise_layer_norm(x.transpose(1, 2)).transpose(1, 2))
        return self.pointwise_conv2(x).transpose(1, 2)


class SelfAttention(nn.Module):
    """Multi-head attention with a learned bias per clipped relative distance (Shaw et al.)."""

    query_block = 256  # queries per step: memory grows as block x T, not T x T

    def __init__(self, cfg: SemanticConfig):
        super().__init__()
        dim = cfg.hidden_size
        self.heads = cfg.num_attention_heads
        self.head_size = dim // self.heads
        self.left = cfg.left_max_position_embeddings
        self.right = cfg.right_max_position_embeddings
        self.linear_q = Linear(dim, dim)
        self.linear_k = Linear(dim, dim)
        self.linear_v = Linear(dim, dim)
        self.linear_out = Linear(dim, dim)
        self.distance_embedding = nn.Embedding(self.left + self.right + 1, self.head_size)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        b, t, _ = x.shape
        shape = (b, t, self.heads, self.head_size)
        q = self.linear_q(x).view(shape).transpose(1, 2)
        k = self.linear_k(x).view(shape).transpose(1, 2)
        v = self.linear_v(x).view(shape).transpose(1, 2)
        # Queries in blocks: the bias of a block is [B, H, block, T], never the whole T x T
        # (one block of all queries when traced for export, where the length is symbolic).
        if exporting():
            y = self._attend(q, k, v, 0, key_mask)
        else:
            y = torch.cat([self._attend(q[:, :, s : s + self.query_block], k, v, s, key_mask)
                           for s in range(0, t, self.query_block)], dim=2)
        return self.linear_out(y.transpose(1, 2).reshape(b, t, -1))

    def _attend(self, q, k, v, start: int, key_mask: torch.Tensor | None) -> torch.Tensor:
        """Attention of queries start.. (q [B, H, n, D]) to all keys, with the distance bias."""
        b, _, n, _ = q.shape
        t = k.shape[2]
        scale = self.head_size**-0.5
        q_pos = torch.arange(start, start + n, device=q.device)
        k_pos = torch.arange(t, device=q.device)
        distance = (k_pos[None, :] - q_pos[:, None]).clamp(-self.left, self.right) + self.left
        per_distance = q @ self.distance_embedding.weight.to(q.dtype).t()  # [B, H, n, L+R+1]
        bias = per_distance.gather(-1, distance.expand(b, self.heads, n, t)) * scale
        if key_mask is not None:
            bias = bias.masked_fill(~key_mask[:, None, None, :], torch.finfo(bias.dtype).min)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


class ConformerLayer(nn.Module):
    def __init__(self, cfg: SemanticConfig):
        super().__init__()
        dim, eps = cfg.hidden_size, cfg.layer_norm_eps
        self.ffn1_layer_norm = nn.LayerNorm(dim, eps=eps)
        self.ffn1 = FeedForward(dim, cfg.intermediate_size)
        self.self_attn_layer_norm = nn.LayerNorm(dim, eps=eps)
        self.self_attn = SelfAttention(cfg)
        self.conv_module = ConvModule(cfg)
        self.ffn2_layer_norm = nn.LayerNorm(dim, eps=eps)
        self.ffn2 = FeedForward(dim, cfg.intermediate_size)
        self.final_layer_norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.ffn1(self.ffn1_layer_norm(x)) * 0.5 + x
        x = self.self_attn(self.self_attn_layer_norm(x), mask) + x
        x = x + self.conv_module(x, mask)
        x = self.ffn2(self.ffn2_layer_norm(x)) * 0.5 + x
        return self.final_layer_norm(x)


class FeatureProjection(nn.Module):
    def __init__(self, cfg: SemanticConfig):
        super().__init__()
        self.layer_norm = nn.LayerNorm(cfg.feature_projection_input_dim, eps=cfg.layer_norm_eps)
        self.projection = Linear(cfg.feature_projection_input_dim, cfg.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.layer_norm(x))


class ConformerStack(nn.Module):
    def __init__(self, cfg: SemanticConfig):
        super().__init__()
        self.layers = nn.ModuleList(ConformerLayer(cfg) for _ in range(cfg.num_hidden_layers))


class SemanticEncoder(nn.Module):
    """Features [B, T, 160] (+ valid-frame mask for padded batches) -> hidden states [B, T, C]."""

    def __init__(self, cfg: SemanticConfig):
        super().__init__()
        self.feature_projection = FeatureProjection(cfg)
        self.encoder = ConformerStack(cfg)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.feature_projection(features)
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)
        for layer in self.encoder.layers:
            x = layer(x, mask)
        return x
