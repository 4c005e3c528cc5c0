"""The Qwen3-TTS 12 Hz tokenizer's network: Mimi's encoding half (models/mimi) and the decoder
below, causal end to end, so every module streams exactly (nn/streaming.py).

Decoder: split RVQ lookup (Mimi's: 1 semantic + 15 acoustic codebooks, each half summed and
projected) -> causal conv k3 -> transformer (RMSNorm, SwiGLU, layer scales, RoPE, each step
attending to itself and the 71 before it) between two linear projections -> two causal
ConvTranspose k2 + ConvNeXt upsamplers (12.5 -> 50 Hz) -> causal conv k7 -> four blocks of
SnakeBeta, causal ConvTranspose (x8, x5, x4, x3) and three residual units -> SnakeBeta ->
causal conv k7 -> clamp to [-1, 1].

Module names are the hub checkpoint's, besides the transformer's (audiotok's
WindowedTransformer names; weights.py maps them)."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ...nn.activations import SnakeBeta
from ...nn.conv import CausalConv1d, CausalConvTranspose1d
from ...nn.convnext import ConvNeXtBlock
from ...nn.linear import Linear
from ...nn.transformer import UNBOUNDED, TransformerConfig, WindowedTransformer
from ..mimi.model import MimiModel
from ..mimi.quantizer import SplitResidualVQ
from .config import DecoderConfig, Qwen3TtsConfig


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv1d(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv1d(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.act2(self.conv1(self.act1(x)))) + x


class DecoderBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, rate: int):
        super().__init__()
        self.block = nn.Sequential(SnakeBeta(in_dim),
                                   CausalConvTranspose1d(in_dim, out_dim, 2 * rate, stride=rate),
                                   *(ResidualUnit(out_dim, d) for d in (1, 3, 9)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class ProjectedTransformer(WindowedTransformer):
    """A WindowedTransformer between input_proj (latent -> width) and output_proj (back)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__(TransformerConfig(
            dim=cfg.hidden_size, n_layer=cfg.num_hidden_layers, n_head=cfg.num_attention_heads,
            head_dim=cfg.head_dim, intermediate_size=cfg.intermediate_size,
            window=cfg.sliding_window, n_local_heads=cfg.num_key_value_heads,
            rope_base=cfg.rope_theta, norm_eps=cfg.rms_norm_eps, rope_dtype="hf"))
        self.input_proj = Linear(cfg.latent_dim, cfg.hidden_size)
        self.output_proj = Linear(cfg.hidden_size, cfg.latent_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_proj(x.transpose(1, 2)).transpose(1, 2)
        return self.output_proj(super().forward(x).transpose(1, 2)).transpose(1, 2)


class Decoder(nn.Module):
    """Codes [B, 16, T] -> audio [B, 1, 1920 T] in [-1, 1]."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.quantizer = SplitResidualVQ(cfg.codebook_dim, cfg.codebook_dim // 2,
                                         cfg.num_quantizers, 1, cfg.codebook_size)
        self.pre_conv = CausalConv1d(cfg.codebook_dim, cfg.latent_dim, 3)
        self.pre_transformer = ProjectedTransformer(cfg)
        self.upsample = nn.Sequential(*(
            nn.Sequential(CausalConvTranspose1d(cfg.latent_dim, cfg.latent_dim, f, stride=f),
                          ConvNeXtBlock(cfg.latent_dim))
            for f in cfg.upsampling_ratios))
        dim = cfg.decoder_dim
        layers: list[nn.Module] = [CausalConv1d(cfg.latent_dim, dim, 7)]
        for i, rate in enumerate(cfg.upsample_rates):
            layers.append(DecoderBlock(dim // 2**i, dim // 2 ** (i + 1), rate))
        out = dim // 2 ** len(cfg.upsample_rates)
        layers += [SnakeBeta(out), CausalConv1d(out, 1, 7)]
        self.decoder = nn.Sequential(*layers)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        x = self.pre_transformer(self.pre_conv(self.quantizer.decode(codes)))
        return self.decoder(self.upsample(x)).clamp(-1, 1)


class Qwen3TtsModel(nn.Module):
    def __init__(self, cfg: Qwen3TtsConfig):
        super().__init__()
        self.config = cfg
        encoder = cfg.encoder if cfg.attention == "window" else \
            dataclasses.replace(cfg.encoder, context=UNBOUNDED)
        self.encoder = MimiModel(encoder, decoder=False)
        self.decoder = Decoder(cfg.decoder)
        self.encoder.encode_levels = cfg.num_quantizers

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Codes [B, 16, T] for audio [B, 1, L] (each convolution pads its own input)."""
        return self.encoder.encode(audio)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Audio [B, 1, 1920 T] for in-range codes [B, 16, T]."""
        return self.decoder(codes)

    def stream_roots(self, kind: str) -> list[nn.Module]:
        """The modules that hold streaming state on the encode or decode path."""
        if kind == "encode":
            return self.encoder.stream_roots("encode")
        d = self.decoder
        return [d.pre_conv, d.pre_transformer, d.upsample, d.decoder]

    def float32_islands(self) -> list[nn.Module]:
        """Modules kept in float32 under reduced precision (see nn/precision.py)."""
        return [*self.encoder.float32_islands(), self.decoder.quantizer,
                self.decoder.decoder[-1]]
