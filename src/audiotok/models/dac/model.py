"""The DAC network: a Snake/convolution encoder (residual units at dilations 1, 3, 9, strided
convolutions), a residual VQ of factorised, L2-normalised codebooks (nn/vq.py), and a decoder
of transposed convolutions and residual units ending in tanh. No part is causal; every
convolution pads symmetrically.

Module names are the `dac` package's with weight norm folded, so its state dict loads as it is
(weights.py maps the transformers names onto them).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...nn.activations import Snake1d
from ...nn.conv import Conv1d, ConvTranspose1d
from ...nn.snake_blocks import EncoderBlock, residual_units
from ...nn.vq import ResidualVQ
from .config import DacConfig


class DecoderBlock(nn.Module):
    """Snake, a transposed convolution (kernel 2s, stride s, padding ceil(s / 2), no output
    padding: an odd stride gives L * s - 1 steps), three residual units."""

    def __init__(self, dim: int, out: int, stride: int):
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim),
            ConvTranspose1d(dim, out, 2 * stride, stride=stride, padding=math.ceil(stride / 2)),
            *residual_units(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Encoder(nn.Module):
    def __init__(self, cfg: DacConfig):
        super().__init__()
        dim = cfg.encoder_dim
        layers: list[nn.Module] = [Conv1d(1, dim, 7, padding=3)]
        for stride in cfg.encoder_rates:
            layers.append(EncoderBlock(dim, stride))
            dim *= 2
        layers += [Snake1d(dim), Conv1d(dim, cfg.latent_dim, 3, padding=1)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Decoder(nn.Module):
    def __init__(self, cfg: DacConfig):
        super().__init__()
        c = cfg.decoder_dim
        layers: list[nn.Module] = [Conv1d(cfg.latent_dim, c, 7, padding=3)]
        for i, stride in enumerate(cfg.decoder_rates):
            layers.append(DecoderBlock(c // 2**i, c // 2 ** (i + 1), stride))
        out = c // 2 ** len(cfg.decoder_rates)
        layers += [Snake1d(out), Conv1d(out, 1, 7, padding=3), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class DacModel(nn.Module):
    """encode(audio [B, 1, N]) -> codes [B, encode_levels, T] (T = the encoder's frames of N
    samples: N / hop for whole frames); decode(codes [B, k, T], any leading k codebooks) ->
    audio [B, 1, config.decoded_samples(T)]."""

    def __init__(self, cfg: DacConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.quantizer = ResidualVQ(cfg.latent_dim, cfg.n_codebooks, cfg.codebook_size,
                                    cfg.codebook_dim)
        self.decoder = Decoder(cfg)
        self.encode_levels = cfg.n_codebooks  # the codec's `codebooks` setting

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        codes, _ = self.quantizer.encode(self.encoder(audio), self.encode_levels)
        return codes

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.quantizer.decode(codes))

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the codebook search."""
        return [self.quantizer]
