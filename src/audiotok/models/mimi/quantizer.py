"""Mimi's split residual vector quantizer: one semantic RVQ and one acoustic RVQ over the same
latent, each with its own 1x1 projections and Euclidean codebooks.

A codebook is stored folded (`embedding_sum / max(cluster_usage, 1e-5)`, as both references
derive it) in one buffer per RVQ, [levels, bins, dim]. The nearest row is chosen by
`torch.cdist` then argmin (first index on ties), the call both references make: its rounding
decides near-ties, and token parity depends on it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import MimiConfig


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
        codes = []
        for codebook in self.codebook[:levels].float():
            index = torch.cdist(residual[None], codebook[None], p=2)[0].argmin(-1)
            residual = residual - F.embedding(index, codebook)
            codes.append(index)
        return torch.stack(codes, 0).view(levels, b, t).transpose(0, 1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Latent [B, C, T] for codes [B, k, T] (the first k levels)."""
        z = 0
        for level in range(codes.shape[1]):
            z = z + F.embedding(codes[:, level], self.codebook[level])
        return self.output_proj(z.transpose(1, 2).to(self.output_proj.weight.dtype))


class SplitResidualVQ(nn.Module):
    """Codes: semantic levels first, then acoustic ones; any leading subset decodes."""

    def __init__(self, cfg: MimiConfig):
        super().__init__()
        n_sem = cfg.num_semantic_quantizers
        self.semantic = ResidualVQ(cfg.dimension, cfg.codebook_dim, n_sem, cfg.codebook_size)
        self.acoustic = ResidualVQ(cfg.dimension, cfg.codebook_dim,
                                   cfg.num_quantizers - n_sem, cfg.codebook_size)

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
