"""The residual Snake blocks of DAC-style codecs (non-causal, symmetric padding): a residual
unit x + conv1x1(Snake(conv_k7,dilated(Snake(x)))) and an encoder block (three units at
dilations 1, 3, 9, Snake, a strided convolution doubling the channels). Module names are the
references' (`block.N`), so their state dicts load as they are."""

from __future__ import annotations

import math

import torch
from torch import nn

from .activations import Snake1d
from .conv import Conv1d


class ResidualUnit(nn.Module):
    """x + conv1x1(Snake(conv_k7,dilated(Snake(x)))); `groups` of the k7 convolution (its
    channels: depthwise)."""

    def __init__(self, dim: int, dilation: int, groups: int = 1):
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim),
            Conv1d(dim, dim, 7, dilation=dilation, padding=3 * dilation, groups=groups),
            Snake1d(dim),
            Conv1d(dim, dim, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def residual_units(dim: int, groups: int = 1) -> list[nn.Module]:
    return [ResidualUnit(dim, d, groups) for d in (1, 3, 9)]


class EncoderBlock(nn.Module):
    """Three residual units, Snake, then a convolution of kernel 2 * stride, stride `stride`,
    padding ceil(stride / 2), dim -> 2 * dim channels."""

    def __init__(self, dim: int, stride: int, groups: int = 1):
        super().__init__()
        self.block = nn.Sequential(
            *residual_units(dim, groups), Snake1d(dim),
            Conv1d(dim, 2 * dim, 2 * stride, stride=stride, padding=math.ceil(stride / 2)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)
