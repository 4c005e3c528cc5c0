"""ConvNeXt block (depthwise conv, a norm, GELU MLP, per-channel scale), causal or centred."""

from __future__ import annotations

import torch
from torch import nn

from .conv import CausalConv1d
from .linear import Linear


class ConvNeXtBlock(nn.Module):
    """x + gamma * MLP(norm(dwconv(x))), channels-first in and out.

    The depthwise convolution is causal (left padding) or, with causal=False, centred (zero
    padding kernel // 2 each side). hidden: the MLP's width (default mlp_ratio * dim). norm: a
    LayerNorm by default, or a conditioned norm called as norm(x, cond) when forward() gets a
    condition (Vocos' AdaLayerNorm)."""

    def __init__(self, dim: int, kernel_size: int = 7, mlp_ratio: float = 4.0, eps: float = 1e-6,
                 *, hidden: int | None = None, causal: bool = True, norm: nn.Module | None = None):
        super().__init__()
        hidden = hidden or int(mlp_ratio * dim)
        self.dwconv = (CausalConv1d(dim, dim, kernel_size, groups=dim) if causal else
                       nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim))
        self.norm = norm if norm is not None else nn.LayerNorm(dim, eps=eps)
        self.pwconv1 = Linear(dim, hidden)
        self.act = nn.GELU()
        self.pwconv2 = Linear(hidden, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, cond=None) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 1)
        y = self.norm(y) if cond is None else self.norm(y, cond)
        y = self.pwconv2(self.act(self.pwconv1(y)))
        y = (self.gamma * y).permute(0, 2, 1)
        return x + y
