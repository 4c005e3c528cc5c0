"""The Mimi network: causal SEANet encoder, 25 Hz transformer, stride-2 downsample to 12.5 Hz,
split RVQ; decoding mirrors it (depthwise upsample, transformer, SEANet decoder). Causal end to
end, so every module streams exactly (nn/streaming.py).

Module names are transformers' flat checkpoint names for the convolutions, and audiotok's
WindowedTransformer names for the transformers (weights.py maps both checkpoint layouts)."""

from __future__ import annotations

import torch
from torch import nn

from ...nn.conv import CausalConv1d, CausalConvTranspose1d
from ...nn.precision import run_in
from ...nn.transformer import TransformerConfig, WindowedTransformer
from .config import MimiConfig
from .quantizer import SplitResidualVQ


def run_layers(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Each layer gets its input in its own dtype (the float32 islands)."""
    for layer in layers:
        x = run_in(layer, x)
    return x


class ResidualBlock(nn.Module):
    """x + conv_1(ELU(conv_k(ELU(x)))), hidden width dim / compress.

    The activations at 24 kHz are large (64 channels: 61 MB per 10 s), so every step that can
    writes into its input: the ELU after a convolution, and the sum into the block's output."""

    def __init__(self, dim: int, kernel_size: int, compress: int):
        super().__init__()
        hidden = dim // compress
        self.block = nn.Sequential(nn.ELU(), CausalConv1d(dim, hidden, kernel_size),
                                   nn.ELU(inplace=True), CausalConv1d(hidden, dim, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x).add_(x)


class SEANetEncoder(nn.Module):
    """Audio [B, 1, L] -> [B, dimension, L / hop]."""

    def __init__(self, cfg: MimiConfig):
        super().__init__()
        dim = cfg.n_filters
        layers: list[nn.Module] = [CausalConv1d(cfg.channels, dim, cfg.kernel_size)]
        for ratio in reversed(cfg.ratios):
            layers += [ResidualBlock(dim, cfg.residual_kernel_size, cfg.compress),
                       nn.ELU(inplace=True), CausalConv1d(dim, 2 * dim, 2 * ratio, stride=ratio)]
            dim *= 2
        layers += [nn.ELU(inplace=True), CausalConv1d(dim, cfg.dimension, cfg.last_kernel_size)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_layers(self.layers, x)


class SEANetDecoder(nn.Module):
    """[B, dimension, T'] -> audio [B, 1, T' * hop] (no final activation)."""

    def __init__(self, cfg: MimiConfig):
        super().__init__()
        dim = cfg.n_filters * 2 ** len(cfg.ratios)
        layers: list[nn.Module] = [CausalConv1d(cfg.dimension, dim, cfg.kernel_size)]
        for ratio in cfg.ratios:
            layers += [nn.ELU(inplace=True),
                       CausalConvTranspose1d(dim, dim // 2, 2 * ratio, stride=ratio),
                       ResidualBlock(dim // 2, cfg.residual_kernel_size, cfg.compress)]
            dim //= 2
        layers += [nn.ELU(inplace=True), CausalConv1d(dim, cfg.channels, cfg.last_kernel_size)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_layers(self.layers, x)


def transformer(cfg: MimiConfig) -> WindowedTransformer:
    return WindowedTransformer(TransformerConfig(
        dim=cfg.dimension, n_layer=cfg.num_layers, n_head=cfg.num_heads, head_dim=cfg.head_dim,
        intermediate_size=cfg.intermediate_size, window=cfg.context, rope_base=cfg.rope_base,
        norm_eps=cfg.norm_eps, norm="layer", mlp="gelu", final_norm=False, rope_dtype="float32",
    ))


class MimiModel(nn.Module):
    """Mimi; decoder=False: the encoding half alone (SEANet encoder, transformer, downsample,
    quantizer), as codecs that decode Mimi's codes with a decoder of their own hold it."""

    def __init__(self, cfg: MimiConfig, decoder: bool = True):
        super().__init__()
        self.config = cfg
        dim, stride = cfg.dimension, cfg.downsample_stride
        self.encoder = SEANetEncoder(cfg)
        self.encoder_transformer = transformer(cfg)
        self.downsample = CausalConv1d(dim, dim, 2 * stride, stride=stride, bias=False,
                                       pad_mode="replicate")
        self.quantizer = SplitResidualVQ.of(cfg)
        if decoder:
            self.upsample = CausalConvTranspose1d(dim, dim, 2 * stride, stride=stride,
                                                  groups=dim, bias=False)
            self.decoder_transformer = transformer(cfg)
            self.decoder = SEANetDecoder(cfg)
        # codebooks encode() returns (the codec's setting; decode takes any leading subset)
        self.encode_levels = cfg.num_quantizers

    def latent(self, audio: torch.Tensor) -> torch.Tensor:
        """Unquantized 12.5 Hz latent [B, dimension, T] for audio [B, 1, L]."""
        x = self.encoder(audio)
        return self.downsample(self.encoder_transformer(x))

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Codes [B, encode_levels, T] for audio [B, 1, L]; L a multiple of the frame unless
        padding inside each convolution (transformers' convention) is wanted."""
        return self.quantizer.encode(self.latent(audio), self.encode_levels)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Audio [B, 1, T * samples_per_frame] for in-range codes [B, k, T], 1 <= k <= 32."""
        x = run_in(self.upsample, self.quantizer.decode(codes))
        return self.decoder(self.decoder_transformer(x))

    def stream_roots(self, kind: str) -> list[nn.Module]:
        """The modules that hold streaming state on the encode or decode path."""
        if kind == "encode":
            return [self.encoder, self.encoder_transformer, self.downsample]
        return [self.upsample, self.decoder_transformer, self.decoder]

    def float32_islands(self) -> list[nn.Module]:
        """Modules kept in float32 under reduced precision (see nn/precision.py)."""
        decoder = getattr(self, "decoder", None)
        return [self.encoder.layers[0], self.quantizer,
                *([] if decoder is None else [decoder.layers[-1]])]
