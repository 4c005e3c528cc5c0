"""Mimi's split residual vector quantizer: one semantic RVQ and one acoustic RVQ over the same
latent, each with its own 1x1 projections and Euclidean codebooks.

A codebook is stored folded (`embedding_sum / max(cluster_usage, 1e-5)`, as both references
derive it) in one buffer per RVQ, [levels, bins, dim]. The nearest row is chosen by the
distances `torch.cdist` computes, then argmin (first index on ties), the call both references
make: its rounding decides near-ties, and token parity depends on it. cdist's matrix-product
form (ATen's `_euclidean_dist`) rebuilds [codebook, 1, |codebook|^2] on every call; it is built
once here (kernels.derivations) and the product is the same call on the same operands, so the
distances are bit-identical. Under the oneDNN kernel rule the product is oneDNN's
(kernels.rule_product): within rounding, so a code can differ from the references' only where
two distances tie in float32 (docs/codecs/mimi.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.kernels import derived, rule_product
from .config import MimiConfig


def _search_matrices(codebook: torch.Tensor) -> torch.Tensor:
    """[levels, bins, dim + 2]: each codebook as _euclidean_dist pads it, [c, 1, |c|^2]."""
    c = codebook.float()
    norm = c.pow(2).sum(-1, True)
    return torch.cat([c, torch.ones_like(norm), norm], -1)


def _distances(x: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """torch.cdist(x[None], codebook[None])[0] for x [N, dim]: bit for bit, or under the oneDNN
    rule the same product by oneDNN (within rounding)."""
    norm = x.pow(2).sum(-1, True)
    padded = torch.cat([x.mul(-2), norm, torch.ones_like(norm)], -1)
    product = rule_product(padded, matrix, lambda: padded[None].matmul(matrix[None].mT)[0],
                           min_rows=1)
    return product.clamp_min_(0).sqrt_()


PUSH_FRAMES = 16  # batch x frames up to which decode() looks every level up at once


class ResidualVQ(nn.Module):
    def __init__(self, dim: int, codebook_dim: int, levels: int, bins: int):
        super().__init__()
        self.input_proj = nn.Conv1d(dim, codebook_dim, 1, bias=False)
        self.output_proj = nn.Conv1d(codebook_dim, dim, 1, bias=False)
        self.register_buffer("codebook", torch.zeros(levels, bins, codebook_dim))

    @property
    def levels(self) -> int:
        return self.codebook.shape[0]

    def encode(self, z: torch.Tensor, levels: int) -> torch.Tensor:
        """Codes [B, levels, T] of latent z [B, C, T]."""
        b, _, t = z.shape
        residual = self.input_proj(z.to(self.input_proj.weight.dtype))
        residual = residual.transpose(1, 2).reshape(b * t, -1).float()
        codebooks = self.codebook[:levels].float()
        search = derived(self.codebook, "euclidean search", _search_matrices)
        codes = []
        for codebook, matrix in zip(codebooks, search, strict=False):
            index = _distances(residual, matrix).argmin(-1)
            residual = residual - F.embedding(index, codebook)
            codes.append(index)
        return torch.stack(codes, 0).view(levels, b, t).transpose(0, 1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Latent [B, C, T] for codes [B, k, T] (the first k levels): the rows summed level by
        level, as both references add them; up to PUSH_FRAMES frames (a streaming push), all
        levels' rows in one lookup and one sum (31 levels of one frame: 6 against 134 us; the
        sum rounds its own way, within 1e-6)."""
        b, k, t = codes.shape
        if b * t <= PUSH_FRAMES:
            offsets = torch.arange(k, device=codes.device)[:, None] * self.codebook.shape[1]
            z = F.embedding((codes + offsets).transpose(1, 2),
                            self.codebook[:k].flatten(0, 1)).sum(2)
        else:
            z = 0
            for level in range(k):
                z = z + F.embedding(codes[:, level], self.codebook[level])
        return self.output_proj(z.transpose(1, 2).to(self.output_proj.weight.dtype))


class SplitResidualVQ(nn.Module):
    """Codes: semantic levels first, then acoustic ones; any leading subset decodes."""

    def __init__(self, dim: int, codebook_dim: int, levels: int, semantic_levels: int,
                 bins: int):
        super().__init__()
        self.semantic = ResidualVQ(dim, codebook_dim, semantic_levels, bins)
        self.acoustic = ResidualVQ(dim, codebook_dim, levels - semantic_levels, bins)

    @classmethod
    def of(cls, cfg: MimiConfig) -> SplitResidualVQ:
        return cls(cfg.dimension, cfg.codebook_dim, cfg.num_quantizers,
                   cfg.num_semantic_quantizers, cfg.codebook_size)

    def encode(self, z: torch.Tensor, levels: int) -> torch.Tensor:
        n_sem = self.semantic.levels
        codes = self.semantic.encode(z, min(levels, n_sem))
        if levels > n_sem:
            codes = torch.cat([codes, self.acoustic.encode(z, levels - n_sem)], dim=1)
        return codes

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        n_sem = self.semantic.levels
        z = self.semantic.decode(codes[:, :n_sem])
        if codes.shape[1] > n_sem:
            z = z + self.acoustic.decode(codes[:, n_sem:])
        return z
