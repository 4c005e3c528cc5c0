"""The flow's velocity estimator: a causal 1-D U-Net (CosyVoice 2's CausalConditionalDecoder).

Input [x, mu, speaker, cond] stacked on channels (4 x 80) with the time t -> velocity
[B, 80, T]. One level: a down stage (resnet, transformer blocks, causal convolution), middle
stages (resnet, transformer blocks), an up stage on [x, skip] and a final causal block and
projection. Every convolution looks only left (2 frames for kernel 3); attention is
bidirectional over the item's frames (padded keys masked), or, in CosyVoice 2's streaming mode,
within chunks of frames and those before. Names are the reference's
(`flow.decoder.estimator.*`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ....nn.linear import Linear
from .config import N_MELS, FlowConfig
from .encoder import chunked


def time_embedding(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """[B, dim]: sin and cos of scale * t * 10000^(-k / (dim/2 - 1)), k < dim / 2."""
    half = dim // 2
    rate = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10000) / (half - 1)))
    angle = scale * t[:, None] * rate[None, :]
    return torch.cat([angle.sin(), angle.cos()], -1)


class CausalConv1d(nn.Conv1d):
    """Conv1d with kernel - 1 zeros on the left."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.kernel_size[0] - 1, 0)))


class ChannelNorm(nn.LayerNorm):
    """LayerNorm over the channels of [B, C, T]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class CausalBlock(nn.Module):
    """mask -> causal conv k3 -> LayerNorm over channels -> Mish -> mask (`block.0`, `block.2`)."""

    def __init__(self, dim: int, dim_out: int):
        super().__init__()
        self.block = nn.ModuleDict({"0": CausalConv1d(dim, dim_out, 3), "2": ChannelNorm(dim_out)})

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.block["2"](self.block["0"](x * mask))
        return F.mish(h) * mask


class CausalResnet(nn.Module):
    """block2(block1(x) + Linear(Mish(t_emb))) + res_conv(x) (1x1)."""

    def __init__(self, dim: int, dim_out: int, time_dim: int):
        super().__init__()
        self.mlp = nn.ModuleDict({"1": Linear(time_dim, dim_out)})
        self.block1 = CausalBlock(dim, dim_out)
        self.block2 = CausalBlock(dim_out, dim_out)
        self.res_conv = nn.Conv1d(dim, dim_out, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, t_emb: torch.Tensor) -> torch.Tensor:
        h = self.block1(x, mask) + self.mlp["1"](F.mish(t_emb))[:, :, None]
        return self.block2(h, mask) + self.res_conv(x * mask)


class Attention(nn.Module):
    """Multi-head self-attention, no q/k/v bias, scale 1/sqrt(head_dim), additive key bias."""

    def __init__(self, dim: int, heads: int, head_dim: int):
        super().__init__()
        self.heads, inner = heads, heads * head_dim
        self.to_q = Linear(dim, inner, bias=False)
        self.to_k = Linear(dim, inner, bias=False)
        self.to_v = Linear(dim, inner, bias=False)
        self.to_out = nn.ModuleList([Linear(inner, dim)])

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """x [B, T, C]; bias [B, 1, 1 or T, T] (0, or -1e10 on keys a query may not see)."""
        b, t, _ = x.shape

        def heads(y):
            return y.view(b, t, self.heads, -1).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.to_q(x)), heads(self.to_k(x)),
                                             heads(self.to_v(x)), attn_mask=bias)
        return self.to_out[0](out.transpose(1, 2).reshape(b, t, -1))


class GeluProjection(nn.Module):
    def __init__(self, dim: int, dim_out: int):
        super().__init__()
        self.proj = Linear(dim, dim_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x))


class FeedForward(nn.Module):
    """Linear to 4x, exact GELU, Linear back (`net.0.proj`, `net.2`)."""

    def __init__(self, dim: int):
        super().__init__()
        self.net = nn.ModuleList([GeluProjection(dim, 4 * dim), nn.Identity(),
                                  Linear(4 * dim, dim)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net[2](self.net[0](x))


class TransformerBlock(nn.Module):
    """x + attention(LN(x)), then x + FF(LN(x)) (FF: Linear 4x, exact GELU, Linear)."""

    def __init__(self, dim: int, heads: int, head_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads, head_dim)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = x + self.attn1(self.norm1(x), bias)
        return x + self.ff(self.norm3(x))


class Stage(nn.ModuleList):
    """[resnet, transformer blocks (, causal conv)]: the reference's list per U-Net stage."""

    def __init__(self, dim: int, cfg: FlowConfig, time_dim: int, conv: bool):
        c = cfg.unet_channels
        blocks = nn.ModuleList(TransformerBlock(c, cfg.unet_heads, cfg.unet_head_dim)
                               for _ in range(cfg.unet_blocks))
        super().__init__([CausalResnet(dim, c, time_dim), blocks,
                          *([CausalConv1d(c, c, 3)] if conv else [])])

    def forward(self, x: torch.Tensor, mask: torch.Tensor, t_emb: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        x = self[0](x, mask, t_emb).transpose(1, 2)
        for block in self[1]:
            x = block(x, bias)
        return x.transpose(1, 2)


class TimeMLP(nn.Module):
    def __init__(self, dim: int, time_dim: int):
        super().__init__()
        self.linear_1, self.linear_2 = Linear(dim, time_dim), Linear(time_dim, time_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class Estimator(nn.Module):
    def __init__(self, cfg: FlowConfig):
        super().__init__()
        c, dim_in = cfg.unet_channels, 4 * N_MELS
        self.dim_in = dim_in
        time_dim = 4 * c
        self.time_mlp = TimeMLP(dim_in, time_dim)
        self.down_blocks = nn.ModuleList([Stage(dim_in, cfg, time_dim, conv=True)])
        self.mid_blocks = nn.ModuleList(Stage(c, cfg, time_dim, conv=False)
                                        for _ in range(cfg.unet_mid))
        self.up_blocks = nn.ModuleList([Stage(2 * c, cfg, time_dim, conv=True)])
        self.final_block = CausalBlock(c, c)
        self.final_proj = nn.Conv1d(c, N_MELS, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, mu: torch.Tensor, t: torch.Tensor,
                spks: torch.Tensor, cond: torch.Tensor, chunk: int = 0) -> torch.Tensor:
        """x, mu, cond [B, 80, T]; mask [B, 1, T] (1.0 inside the item); t [B]; spks [B, 80];
        chunk > 0: attention within chunks of `chunk` frames and those before -> velocity
        [B, 80, T]. t may be float32 where the rest is in a reduced dtype (its embedding is
        computed in t's dtype, then cast)."""
        t_emb = self.time_mlp(time_embedding(t, self.dim_in).to(self.dtype))
        h = torch.cat([x, mu, spks[:, :, None].expand(-1, -1, x.shape[-1]), cond], 1)
        keep = chunked(mask.bool(), chunk).to(mask.dtype)  # [B, 1 or T, T]
        bias = ((1.0 - keep) * -1.0e10)[:, None]
        down = self.down_blocks[0]
        skip = down(h, mask, t_emb, bias)
        h = down[2](skip * mask)
        for stage in self.mid_blocks:
            h = stage(h, mask, t_emb, bias)
        up = self.up_blocks[0]
        h = up(torch.cat([h, skip], 1), mask, t_emb, bias)
        h = self.final_block(up[2](h * mask), mask)
        return self.final_proj(h * mask) * mask

    @property
    def dtype(self) -> torch.dtype:
        return self.final_proj.weight.dtype
