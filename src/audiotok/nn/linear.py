"""A linear layer computed by nn/kernels' products (the fast form for its rows on this CPU)."""

from __future__ import annotations

import torch
from torch import nn

from .kernels import linear


class Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) computed by kernels.linear."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
