"""Periodic activations used by DAC-style codecs."""

from __future__ import annotations

import torch
from torch import nn


class Snake1d(nn.Module):
    """Snake: x + sin^2(alpha * x) / (alpha + 1e-9), one alpha per channel ([1, C, 1])."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha
        return x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)
