"""The EnCodec network: a SEANet encoder and decoder (nn/seanet.py; causal at 24 kHz) and a
residual VQ with Euclidean codebooks.

Module names are the `encodec` package's (`encoder.model.N.conv.conv`,
`decoder.model.N.convtr.convtr`) with weight norm folded; the codebooks are one buffer,
`quantizer.embed` [n_q, bins, dim].
"""

from __future__ import annotations

import torch
from torch import nn

from ...nn.seanet import Decoder, Encoder, EuclideanResidualVQ
from .config import EncodecConfig


class EncodecModel(nn.Module):
    """encode(audio [B, C, N]) -> codes [B, encode_levels, ceil(N / hop)]; decode(codes
    [B, k, T]) -> audio [B, C, T * hop]. One segment (the 24 kHz model's way)."""

    def __init__(self, cfg: EncodecConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.quantizer = EuclideanResidualVQ(cfg.n_q, cfg.bins, cfg.dimension)
        self.decoder = Decoder(cfg)
        self.encode_levels = cfg.n_q  # the codec's codebooks / bandwidth setting

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        latents = self.encoder(audio.to(self.dtype))
        return self.quantizer.encode(latents.float(), self.encode_levels)

    def latents(self, codes: torch.Tensor) -> torch.Tensor:
        """The decoder's input (in its dtype) of codes [B, k, T]."""
        return self.quantizer.decode(codes).to(self.dtype)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.latents(codes))

    @property
    def dtype(self) -> torch.dtype:
        """The encoder's and decoder's (the codebooks stay float32: float32_islands)."""
        return self.decoder.model[0].conv.conv.weight.dtype

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the codebook search."""
        return [self.quantizer]
