"""The WavTokenizer network: a SEANet encoder (nn/seanet.py, non-causal), one Euclidean
codebook, and a Vocos decoder: a 7-tap convolution, the "pos net" (two ResNet blocks, one
single-head self-attention over the whole input, two ResNet blocks, GroupNorm), AdaLayerNorm
ConvNeXt blocks and an iSTFT head.

Module names are the reference's (`backbone.pos_net.2.q`, `backbone.convnext.N.pwconv1`) with
`feature_extractor.encodec.` dropped from the encoder's and the codebook as one buffer,
`quantizer.embed` [1, bins, dim]; the head's linear is `head.linear` (the reference's
`head.out`). Every decoder layer but the convolutions sees the whole input (GroupNorm's
statistics, the attention), so an item's audio depends on all of its frames.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.convnext import ConvNeXtBlock
from ...nn.istft import ISTFTHead
from ...nn.kernels import full_attention
from ...nn.seanet import Encoder, EuclideanResidualVQ
from .config import WavTokenizerConfig


def _conv(cin: int, cout: int, kernel: int, groups: int = 1) -> nn.Conv1d:
    """A "same" convolution (zero padding kernel // 2 each side)."""
    return nn.Conv1d(cin, cout, kernel, padding=kernel // 2, groups=groups)


class ResnetBlock(nn.Module):
    """x + conv2(swish(GroupNorm(conv1(swish(GroupNorm(x))))))."""

    def __init__(self, dim: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, dim, eps=1e-6)
        self.conv1 = _conv(dim, dim, 3)
        self.norm2 = nn.GroupNorm(groups, dim, eps=1e-6)
        self.conv2 = _conv(dim, dim, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        return x + self.conv2(F.silu(self.norm2(h)))


class AttnBlock(nn.Module):
    """x + proj_out(softmax(q^T k / sqrt(C)) applied to v), q, k, v 1x1 convolutions of
    GroupNorm(x): one head over every frame (kernels.full_attention: the T x T scores are
    never held whole, so memory grows with T, not T^2)."""

    def __init__(self, dim: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, dim, eps=1e-6)
        self.q, self.k, self.v, self.proj_out = (_conv(dim, dim, 1) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        q, k, v = (m(h).transpose(1, 2)[:, None] for m in (self.q, self.k, self.v))  # [B,1,T,C]
        out = full_attention(q, k, v)[:, 0].transpose(1, 2)  # [B, C, T]
        return x + self.proj_out(out)


class AdaLayerNorm(nn.Module):
    """LayerNorm without its own affine, then the scale and shift of one conditioning id
    (tables `scale.weight`, `shift.weight` [ids, dim])."""

    def __init__(self, ids: int, dim: int):
        super().__init__()
        self.dim = dim
        self.scale = nn.Embedding(ids, dim)
        self.shift = nn.Embedding(ids, dim)

    def forward(self, x: torch.Tensor, cond: int) -> torch.Tensor:
        """x [B, T, dim]."""
        y = F.layer_norm(x, (self.dim,), eps=1e-6)
        return y * self.scale.weight[cond] + self.shift.weight[cond]


class Backbone(nn.Module):
    """Latents [B, D, T] -> features [B, T, dim]."""

    def __init__(self, cfg: WavTokenizerConfig):
        super().__init__()
        dim, g = cfg.dim, cfg.groups
        self.embed = _conv(cfg.dimension, dim, 7)
        self.pos_net = nn.Sequential(ResnetBlock(dim, g), ResnetBlock(dim, g), AttnBlock(dim, g),
                                     ResnetBlock(dim, g), ResnetBlock(dim, g),
                                     nn.GroupNorm(g, dim, eps=1e-6))
        self.norm = AdaLayerNorm(cfg.adanorm_embeddings, dim)
        self.convnext = nn.ModuleList(
            ConvNeXtBlock(dim, hidden=cfg.intermediate_dim, causal=False,
                          norm=AdaLayerNorm(cfg.adanorm_embeddings, dim))
            for _ in range(cfg.num_layers))
        self.final_layer_norm = nn.LayerNorm(dim, eps=1e-6)
        self.cond = cfg.bandwidth_id

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pos_net(self.embed(x))
        x = self.norm(x.transpose(1, 2), self.cond).transpose(1, 2)
        for block in self.convnext:
            x = block(x, self.cond)
        return self.final_layer_norm(x.transpose(1, 2))


class WavTokenizerModel(nn.Module):
    """encode(audio [B, 1, N]) -> codes [B, 1, ceil(N / hop)] (each item's own length: the
    reflection that completes the last frame reads its end); decode(codes [B, 1, T]) -> audio
    [B, 1, T * hop]."""

    def __init__(self, cfg: WavTokenizerConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        # the search with torch's own product, as the reference (at width 512 another kernel's
        # sums could move a near-tie)
        self.quantizer = EuclideanResidualVQ(1, cfg.codebook_size, cfg.dimension,
                                             rule_product=False)
        self.backbone = Backbone(cfg)
        self.head = ISTFTHead(cfg.dim, cfg.n_fft, cfg.hop_length)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        latents = self.encoder(audio.to(self.dtype))
        return self.quantizer.encode(latents.float(), 1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        latents = self.quantizer.decode(codes).to(self.dtype)
        return self.head(self.backbone(latents))

    @property
    def dtype(self) -> torch.dtype:
        return self.backbone.embed.weight.dtype

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the codebook search."""
        return [self.quantizer]
