"""The residual Snake blocks of DAC-style codecs (non-causal, symmetric padding): a residual
unit x + conv1x1(Snake(conv_k7,dilated(Snake(x)))), an encoder block (three units at dilations
1, 3, 9, Snake, a strided convolution doubling the channels), a decoder block (Snake, a
transposed convolution, three units), and DAC's encoder and decoder built of them. Module names
are the references' (`block.N`, `model.N`), so their state dicts load as they are."""

from __future__ import annotations

import math

import torch
from torch import nn

from .activations import Snake1d
from .conv import Conv1d, ConvTranspose1d


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


class DecoderBlock(nn.Module):
    """Snake, a transposed convolution dim -> out, three residual units. The convolution has
    stride s and kernel 2s, padding ceil(s / 2) (without output padding an odd stride gives
    L * s - 1 steps, with `odd_padding` L * s); or, given its `kernel`, padding
    (kernel - s) // 2 (L * s steps for kernel - s even)."""

    def __init__(self, dim: int, out: int, stride: int, odd_padding: bool = False,
                 kernel: int | None = None):
        super().__init__()
        if kernel is None:
            up = ConvTranspose1d(dim, out, 2 * stride, stride=stride,
                                 padding=math.ceil(stride / 2),
                                 output_padding=stride % 2 if odd_padding else 0)
        else:
            up = ConvTranspose1d(dim, out, kernel, stride=stride, padding=(kernel - stride) // 2)
        self.block = nn.Sequential(Snake1d(dim), up, *residual_units(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Encoder(nn.Module):
    """DAC's encoder: audio [B, 1, N] -> latents [B, latent, frames]: a k7 convolution to `dim`
    channels, an EncoderBlock per stride (doubling the channels), Snake, a k3 convolution."""

    def __init__(self, dim: int, strides: tuple[int, ...], latent: int):
        super().__init__()
        layers: list[nn.Module] = [Conv1d(1, dim, 7, padding=3)]
        for stride in strides:
            layers.append(EncoderBlock(dim, stride))
            dim *= 2
        layers += [Snake1d(dim), Conv1d(dim, latent, 3, padding=1)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Decoder(nn.Module):
    """DAC's decoder: latents [B, latent, T] -> audio [B, 1, samples]: a k7 convolution to
    `channels`, a DecoderBlock per stride (halving the channels; `kernels`: each block's
    transposed-convolution kernel, default 2 * stride), Snake, a k7 convolution to one channel,
    then tanh where `tanh` (DAC's; X-Codec's decoder has none)."""

    def __init__(self, latent: int, channels: int, strides: tuple[int, ...],
                 odd_padding: bool = False, tanh: bool = True,
                 kernels: tuple[int, ...] | None = None):
        super().__init__()
        layers: list[nn.Module] = [Conv1d(latent, channels, 7, padding=3)]
        for i, stride in enumerate(strides):
            layers.append(DecoderBlock(channels // 2**i, channels // 2 ** (i + 1), stride,
                                       odd_padding, None if kernels is None else kernels[i]))
        out = channels // 2 ** len(strides)
        layers += [Snake1d(out), Conv1d(out, 1, 7, padding=3), *([nn.Tanh()] if tanh else [])]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)
