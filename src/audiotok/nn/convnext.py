"""Causal ConvNeXt block (depthwise causal conv, LayerNorm, GELU MLP, per-channel scale)."""

from __future__ import annotations

import torch
from torch import nn

from .conv import CausalConv1d
from .linear import Linear


class ConvNeXtBlock(nn.Module):
    """x + gamma * MLP(LayerNorm(dwconv(x))), channels-first in and out."""

    def __init__(self, dim: int, kernel_size: int = 7, mlp_ratio: float = 4.0, eps: float = 1e-6):
        super().__init__()
        hidden = int(mlp_ratio * dim)
        self.dwconv = CausalConv1d(dim, dim, kernel_size, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.pwconv1 = Linear(dim, hidden)
        self.act = nn.GELU()
        self.pwconv2 = Linear(hidden, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 1)
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y))))
        y = (self.gamma * y).permute(0, 2, 1)
        return x + y
