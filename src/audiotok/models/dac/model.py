"""The DAC network: a Snake/convolution encoder (residual units at dilations 1, 3, 9, strided
convolutions), a residual VQ of factorised, L2-normalised codebooks (nn/vq.py), and a decoder
of transposed convolutions and residual units ending in tanh. No part is causal; every
convolution pads symmetrically.

Module names are the `dac` package's with weight norm folded, so its state dict loads as it is
(weights.py maps the transformers names onto them).
"""

from __future__ import annotations

import torch
from torch import nn

from ...nn.snake_blocks import Decoder, Encoder
from ...nn.vq import ResidualVQ
from .config import DacConfig


class DacModel(nn.Module):
    """encode(audio [B, 1, N]) -> codes [B, encode_levels, T] (T = the encoder's frames of N
    samples: N / hop for whole frames); decode(codes [B, k, T], any leading k codebooks) ->
    audio [B, 1, config.decoded_samples(T)]."""

    def __init__(self, cfg: DacConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg.encoder_dim, cfg.encoder_rates, cfg.latent_dim)
        self.quantizer = ResidualVQ(cfg.latent_dim, cfg.n_codebooks, cfg.codebook_size,
                                    cfg.codebook_dim)
        self.decoder = Decoder(cfg.latent_dim, cfg.decoder_dim, cfg.decoder_rates)
        self.encode_levels = cfg.n_codebooks  # the codec's `codebooks` setting

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        codes, _ = self.quantizer.encode(self.encoder(audio), self.encode_levels)
        return codes

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.quantizer.decode(codes))

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the codebook search."""
        return [self.quantizer]
