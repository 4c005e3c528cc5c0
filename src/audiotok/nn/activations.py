"""Periodic activations used by DAC-style codecs."""

from __future__ import annotations

import torch
from torch import nn

from .tracing import exporting


class Snake1d(nn.Module):
    """Snake: x + sin^2(alpha * x) / (alpha + 1e-9), one alpha per channel ([1, C, 1])."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The reference's x + (alpha + 1e-9).reciprocal() * sin(alpha * x) ** 2, evaluated in
        # the same order (bit-identical) but in one buffer: these activations are large.
        alpha = self.alpha
        if exporting():  # out of place: a traced graph has no use for the in-place form
            return x + torch.mul(x, alpha).sin().square() * (alpha + 1e-9).reciprocal()
        y = torch.mul(x, alpha)
        y.sin_().square_().mul_((alpha + 1e-9).reciprocal())
        return y.add_(x)


class SnakeBeta(nn.Module):
    """SnakeBeta, log-scale parameters per channel: x + sin^2(e^alpha * x) / (e^beta + 1e-9)."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x + (1 / (beta + 1e-9)) * sin(x * alpha) ** 2 in the reference's order, in one buffer
        alpha = torch.exp(self.alpha[None, :, None])
        beta = torch.exp(self.beta[None, :, None])
        if exporting():
            return x + torch.mul(x, alpha).sin().square() * (1.0 / (beta + 1e-9))
        y = torch.mul(x, alpha)
        y.sin_().square_().mul_(1.0 / (beta + 1e-9))
        return y.add_(x)
