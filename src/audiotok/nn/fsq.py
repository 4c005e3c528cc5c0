"""Finite scalar quantisation: each dimension rounded to one of L levels; the index is the
mixed-radix number of the level digits (dimension 0 least significant)."""

from __future__ import annotations

import math

import torch
from torch import nn


class FSQ(nn.Module):
    def __init__(self, levels: tuple[int, ...]):
        super().__init__()
        self.codebook_size = math.prod(levels)
        basis = [1]
        for n in levels[:-1]:
            basis.append(basis[-1] * n)
        cpu = torch.device("cpu")  # constants, also when the model is built on the meta device
        self.register_buffer("levels", torch.tensor(levels, dtype=torch.int32, device=cpu),
                             persistent=False)
        self.register_buffer("basis", torch.tensor(basis, dtype=torch.int32, device=cpu),
                             persistent=False)

    def bound(self, z: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
        """Soft-clip into the level range: tanh(z + shift) * half_range - offset."""
        half_range = (self.levels - 1) * (1 + eps) / 2
        offset = torch.where(self.levels % 2 == 0, 0.5, 0.0)
        shift = (offset / half_range).atanh()
        return (z + shift).tanh() * half_range - offset

    def indices(self, z: torch.Tensor) -> torch.Tensor:
        """Indices [...] (int64) of bounded latents z [..., D], computed in float32."""
        z = self.bound(z.float())
        half = self.levels // 2
        codes = (z + (z.round() - z)) / half  # the reference's straight-through arithmetic
        return ((codes * half + half) * self.basis).sum(-1).to(torch.int32).long()

    def codes(self, indices: torch.Tensor) -> torch.Tensor:
        """Normalised level values [..., D] in [-1, 1] for indices [...]."""
        digits = (indices[..., None] // self.basis) % self.levels
        half = self.levels // 2
        return (digits - half) / half
