"""The S2 codec network: causal conv encoder, downsampling residual VQ with windowed
transformers, causal conv decoder. Module names follow the reference checkpoint, so the model's
state dict is the canonical (weight-norm folded) checkpoint layout."""

from __future__ import annotations

import torch
from torch import nn

from ...nn.activations import Snake1d
from ...nn.conv import CausalConv1d, CausalConvTranspose1d
from ...nn.convnext import ConvNeXtBlock
from ...nn.precision import param_dtype, run_in
from ...nn.transformer import TransformerConfig, WindowedTransformer
from ...nn.vq import ResidualVQ
from .config import S2Config


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim),
            CausalConv1d(dim, dim, 7, dilation=dilation),
            Snake1d(dim),
            CausalConv1d(dim, dim, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def residual_units(dim: int) -> list[nn.Module]:
    return [ResidualUnit(dim, d) for d in (1, 3, 9)]


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, stride: int, transformer: nn.Module):
        super().__init__()
        self.block = nn.Sequential(
            *residual_units(dim // 2),
            Snake1d(dim // 2),
            CausalConv1d(dim // 2, dim, 2 * stride, stride=stride),
            transformer,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class DecoderBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, stride: int):
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(in_dim),
            CausalConvTranspose1d(in_dim, out_dim, 2 * stride, stride=stride),
            *residual_units(out_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


def encoder_transformer(cfg: S2Config, dim: int, n_layer: int) -> nn.Module:
    if n_layer == 0:
        return nn.Identity()
    return WindowedTransformer(TransformerConfig(
        dim=dim, n_layer=n_layer, n_head=dim // cfg.transformer_head_dim,
        head_dim=cfg.transformer_head_dim, intermediate_size=3 * dim,
        window=cfg.encoder_transformer_window, rope_base=cfg.rope_base, norm_eps=cfg.norm_eps,
    ))


def rvq_transformer(cfg: S2Config) -> WindowedTransformer:
    t = cfg.rvq_transformer
    return WindowedTransformer(TransformerConfig(
        dim=t.dim, n_layer=t.n_layer, n_head=t.n_head, head_dim=t.head_dim,
        intermediate_size=t.intermediate_size, window=t.window_size,
        n_local_heads=t.n_local_heads, rope_base=t.rope_base, norm_eps=t.norm_eps,
    ))


class Encoder(nn.Module):
    """Audio [B, 1, L] -> latent [B, latent_dim, L / hop]. Each block gets its input in its own
    dtype (the first conv stays float32 under reduced precision)."""

    def __init__(self, cfg: S2Config):
        super().__init__()
        dim = cfg.encoder_dim
        blocks: list[nn.Module] = [CausalConv1d(1, dim, 7)]
        for stride, n_layer in zip(cfg.encoder_rates, cfg.encoder_transformer_layers, strict=True):
            dim *= 2
            blocks.append(EncoderBlock(dim, stride, encoder_transformer(cfg, dim, n_layer)))
        blocks += [Snake1d(dim), CausalConv1d(dim, cfg.latent_dim, 3)]
        self.block = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.block:
            x = run_in(block, x)
        return x


class Decoder(nn.Module):
    """Latent [B, latent_dim, T'] -> audio [B, 1, T' * hop] in [-1, 1]. Each layer gets its input
    in its own dtype (the last conv stays float32 under reduced precision)."""

    def __init__(self, cfg: S2Config):
        super().__init__()
        dim = cfg.decoder_dim
        layers: list[nn.Module] = [CausalConv1d(cfg.latent_dim, dim, 7)]
        for i, stride in enumerate(cfg.decoder_rates):
            layers.append(DecoderBlock(dim // 2**i, dim // 2 ** (i + 1), stride))
        out_dim = dim // 2 ** len(cfg.decoder_rates)
        layers += [Snake1d(out_dim), CausalConv1d(out_dim, 1, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.model:
            x = run_in(layer, x)
        return x


class Quantizer(nn.Module):
    """Downsample the latent to the code rate, run the pre-transformer, quantise (1 semantic +
    N residual codebooks); decoding runs the post-transformer and upsamples back."""

    def __init__(self, cfg: S2Config):
        super().__init__()
        dim = cfg.quantizer_input_dim
        self.semantic_quantizer = ResidualVQ(dim, 1, cfg.semantic_codebook_size, cfg.codebook_dim)
        self.quantizer = ResidualVQ(dim, cfg.residual_codebooks, cfg.residual_codebook_size,
                                    cfg.codebook_dim)
        factors = cfg.quantizer_downsample_factor
        self.downsample = nn.Sequential(*(
            nn.Sequential(CausalConv1d(dim, dim, f, stride=f), ConvNeXtBlock(dim)) for f in factors
        ))
        self.upsample = nn.Sequential(*(
            nn.Sequential(CausalConvTranspose1d(dim, dim, f, stride=f), ConvNeXtBlock(dim))
            for f in reversed(factors)
        ))
        self.pre_module = rvq_transformer(cfg)
        self.post_module = rvq_transformer(cfg)

    def encode(self, latent: torch.Tensor) -> torch.Tensor:
        z = self.pre_module(run_in(self.downsample, latent))
        z = z.to(param_dtype(self.semantic_quantizer))  # the VQ is a float32 island
        semantic, z_q = self.semantic_quantizer.encode(z)
        residual, _ = self.quantizer.encode(z - z_q)
        return torch.cat([semantic, residual], dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        z_q = self.semantic_quantizer.decode(codes[:, :1]) + self.quantizer.decode(codes[:, 1:])
        return self.upsample(run_in(self.post_module, z_q))


class S2Model(nn.Module):
    def __init__(self, cfg: S2Config):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.quantizer = Quantizer(cfg)
        self.decoder = Decoder(cfg)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Codes [B, K, L / samples_per_frame] for audio [B, 1, L], L a multiple of the frame."""
        return self.quantizer.encode(self.encoder(audio))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Audio [B, 1, T * samples_per_frame] for in-range codes [B, K, T]."""
        return self.decoder(self.quantizer.decode(codes))

    def stream_roots(self, kind: str) -> list[nn.Module]:
        """The modules that hold streaming state on the encode or decode path."""
        q = self.quantizer
        if kind == "encode":
            return [self.encoder, q.downsample, q.pre_module]
        return [q.post_module, q.upsample, self.decoder]

    def float32_islands(self) -> list[nn.Module]:
        """Modules kept in float32 under reduced precision (see nn/precision.py)."""
        q = self.quantizer
        return [self.encoder.block[0], q.semantic_quantizer, q.quantizer, self.decoder.model[-2]]
