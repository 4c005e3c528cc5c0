"""Cosine-similarity vector quantisation (DAC style) and its residual stack."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class VectorQuantize(nn.Module):
    """Project to a low-dim space, pick the nearest codebook row by cosine similarity, project back.

    The search uses DAC's distance expression ||e||^2 - 2 e.c + ||c||^2 on L2-normalised vectors
    (not a plain dot product): its rounding decides near-ties, and parity depends on it. The search
    always runs in float32.
    """

    def __init__(self, input_dim: int, codebook_size: int, codebook_dim: int):
        super().__init__()
        self.codebook_size = codebook_size
        self.in_proj = nn.Conv1d(input_dim, codebook_dim, 1)
        self.out_proj = nn.Conv1d(codebook_dim, input_dim, 1)
        self.codebook = nn.Embedding(codebook_size, codebook_dim)

    def search(self, z_e: torch.Tensor) -> torch.Tensor:
        """Codebook indices [B, T] for projected latents z_e [B, D, T]."""
        b, d, t = z_e.shape
        enc = F.normalize(z_e.float().permute(0, 2, 1).reshape(b * t, d))
        cb = F.normalize(self.codebook.weight.float())
        dist = (enc.pow(2).sum(1, keepdim=True) - 2 * enc @ cb.t()
                + cb.pow(2).sum(1, keepdim=True).t())
        return (-dist).max(1)[1].reshape(b, t)

    def lookup(self, indices: torch.Tensor) -> torch.Tensor:
        """Raw (un-normalised) codebook rows [B, D, T] for indices [B, T]."""
        return F.embedding(indices, self.codebook.weight).transpose(1, 2)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(indices [B, T], quantised output [B, C, T]) for x [B, C, T]."""
        z_e = self.in_proj(x)
        indices = self.search(z_e)
        z_q = z_e + (self.lookup(indices) - z_e)  # straight-through form, as the reference computes
        return indices, self.out_proj(z_q)

    def decode(self, indices: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.lookup(indices))


class ResidualVQ(nn.Module):
    """Stack of VectorQuantize, each quantising what the previous ones left."""

    def __init__(self, input_dim: int, n_codebooks: int, codebook_size: int, codebook_dim: int):
        super().__init__()
        self.quantizers = nn.ModuleList(
            VectorQuantize(input_dim, codebook_size, codebook_dim) for _ in range(n_codebooks)
        )

    def encode(self, x: torch.Tensor, levels: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(codes [B, n, T], sum of quantised outputs [B, C, T]) of the first `levels`
        quantizers (default all: n = N)."""
        residual, z_q, codes = x, 0.0, []
        for q in self.quantizers[:levels]:
            indices, z_q_i = q.encode(residual)
            codes.append(indices)
            z_q = z_q + z_q_i
            residual = residual - z_q_i
        return torch.stack(codes, dim=1), z_q

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Sum of the first k quantizers' outputs for codes [B, k, T], k <= N."""
        z_q = 0.0
        for i in range(codes.shape[1]):
            z_q = z_q + self.quantizers[i].decode(codes[:, i])
        return z_q
