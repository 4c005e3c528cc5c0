"""The BiCodec network (Spark-TTS's codec).

Tokenize: wav2vec2-XLSR-53's hidden states 11, 14 and 16, averaged, go through a Vocos
backbone ("encoder") to 1024-d latents, projected to 8 dims and searched by cosine in 8192
codes (semantic tokens, 50 Hz); the reference clip's mel spectrogram goes through the speaker
encoder (speaker.py) to 32 global tokens. Detokenize: the semantic codes (raw codebook rows,
projected back) through a Vocos backbone conditioned on the global tokens' d-vector
("prenet"), plus the d-vector, then a DAC-style wave generator (320 samples a token).

Module names are Spark's (`encoder.encoder.convnext.0.dwconv`, `quantizer.in_project`,
`prenet.vocos_backbone.norm.scale`, `decoder.model.1.block.1`) with the weight norms folded;
the wav2vec2 is `wav2vec2.` (transformers' names, its first 16 layers). The sampling blocks of
ratio 1 between backbones have no weights: each returns 3 x (its three branches are the input).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.convnext import ConvNeXtBlock
from ...nn.hubert import Hubert
from ...nn.snake_blocks import Decoder
from .config import BiCodecConfig
from .speaker import MelSpectrogram, SpeakerEncoder


class AdaLayerNorm(nn.Module):
    """LayerNorm without its own affine, then scale(c) and shift(c) of a condition [B, C]."""

    def __init__(self, cond_dim: int, dim: int):
        super().__init__()
        self.dim = dim
        self.scale = nn.Linear(cond_dim, dim)
        self.shift = nn.Linear(cond_dim, dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """x [B, T, dim]."""
        y = F.layer_norm(x, (self.dim,), eps=1e-6)
        return y * self.scale(cond).unsqueeze(1) + self.shift(cond).unsqueeze(1)


class VocosBackbone(nn.Module):
    """[B, C_in, T] -> [B, T, dim]: a k7 convolution, a norm, ConvNeXt blocks and a final
    LayerNorm; with `cond_dim`, the first norm and every block's are AdaLayerNorms of a
    condition [B, cond_dim]."""

    def __init__(self, c_in: int, dim: int, hidden: int, layers: int, cond_dim: int | None = None):
        super().__init__()

        def norm() -> nn.Module:
            return nn.LayerNorm(dim, eps=1e-6) if cond_dim is None else AdaLayerNorm(cond_dim, dim)

        self.embed = nn.Conv1d(c_in, dim, 7, padding=3)
        self.norm = norm()
        self.convnext = nn.ModuleList(ConvNeXtBlock(dim, hidden=hidden, causal=False, norm=norm())
                                      for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed(x).transpose(1, 2)
        x = (self.norm(x) if cond is None else self.norm(x, cond)).transpose(1, 2)
        for block in self.convnext:
            x = block(x, cond)
        return self.final_layer_norm(x.transpose(1, 2))


class Triple(nn.Module):
    """Spark's SamplingBlock at ratio 1: channels-last [B, T, C] -> 3 x channels-first."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 3 * x.transpose(1, 2)


def resampling_stack(dim: int, hidden: int) -> nn.Sequential:
    """Two (sampling block of ratio 1, two-block Vocos backbone) pairs: [B, T, C] -> [B, T, C]."""
    return nn.Sequential(*(nn.Sequential(Triple(), VocosBackbone(dim, dim, hidden, 2))
                           for _ in range(2)))


class SemanticEncoder(nn.Module):
    """wav2vec2 features [B, T, 1024] -> latents [B, latent, T]."""

    def __init__(self, cfg: BiCodecConfig):
        super().__init__()
        d, h = cfg.vocos_dim, cfg.vocos_intermediate_dim
        self.encoder = VocosBackbone(cfg.feature_dim, d, h, cfg.encoder_layers)
        self.downsample = resampling_stack(d, h)
        self.project = nn.Linear(d, cfg.latent_dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.downsample(self.encoder(features.transpose(1, 2)))
        return self.project(x).transpose(1, 2)


class FactorizedVQ(nn.Module):
    """Latents projected to codebook_dim, matched by cosine to the codebook; decoded from the
    raw (unnormalised) codebook rows, projected back."""

    def __init__(self, cfg: BiCodecConfig):
        super().__init__()
        self.in_project = nn.Conv1d(cfg.latent_dim, cfg.codebook_dim, 1)
        self.out_project = nn.Conv1d(cfg.codebook_dim, cfg.latent_dim, 1)
        self.codebook = nn.Embedding(cfg.codebook_size, cfg.codebook_dim)

    def encode(self, z: torch.Tensor) -> torch.Tensor:
        """Latents [B, latent, T] -> tokens [B, T]: the nearest code by the reference's
        distance |e|^2 - 2 e.c + |c|^2 of L2-normalised e and c (first on ties)."""
        b, dim = z.shape[0], self.codebook.weight.shape[1]
        e = F.normalize(self.in_project(z).transpose(1, 2).reshape(-1, dim).float())
        c = F.normalize(self.codebook.weight.float())
        dist = e.pow(2).sum(1, keepdim=True) - 2 * e @ c.t() + c.pow(2).sum(1, keepdim=True).t()
        return (-dist).max(1)[1].view(b, -1)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens [B, T] -> latents [B, latent, T]."""
        return self.out_project(F.embedding(tokens, self.codebook.weight).transpose(1, 2))


class Prenet(nn.Module):
    """Quantised latents [B, latent, T] and the d-vector [B, D] -> features [B, latent, T]."""

    def __init__(self, cfg: BiCodecConfig):
        super().__init__()
        d, h = cfg.prenet_dim, cfg.prenet_intermediate_dim
        self.linear_pre = nn.Linear(cfg.latent_dim, d)
        self.downsample = resampling_stack(d, h)
        self.vocos_backbone = VocosBackbone(d, d, h, cfg.prenet_layers, cfg.speaker_dim)
        self.linear = nn.Linear(d, cfg.latent_dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        x = self.downsample(self.linear_pre(x.transpose(1, 2)))
        x = self.vocos_backbone(x.transpose(1, 2), cond)
        return self.linear(x).transpose(1, 2)


class BiCodecModel(nn.Module):
    def __init__(self, cfg: BiCodecConfig):
        super().__init__()
        self.config = cfg
        self.wav2vec2 = Hubert(dataclasses.replace(cfg.wav2vec2, layers=max(cfg.feature_layers)))
        self.encoder = SemanticEncoder(cfg)
        self.quantizer = FactorizedVQ(cfg)
        self.speaker_encoder = SpeakerEncoder(cfg)
        self.prenet = Prenet(cfg)
        self.decoder = Decoder(cfg.latent_dim, cfg.decoder_channels, cfg.decoder_rates,
                               kernels=cfg.decoder_kernels)
        self.mel = MelSpectrogram(cfg)

    def semantic_tokens(self, audio: torch.Tensor) -> torch.Tensor:
        """Normalised audio [B, N] (zero mean, unit variance per item, as wav2vec2's feature
        extractor gives it) -> semantic tokens [B, (N - 400) // 320 + 1]."""
        states = self.wav2vec2.hidden_states(audio, self.config.feature_layers)
        features = states[0]
        for s in states[1:]:
            features = features + s
        features = features / len(states)
        return self.quantizer.encode(self.encoder(features))

    def global_tokens(self, ref_clip: torch.Tensor) -> torch.Tensor:
        """Reference clips [B, ref_samples] -> global tokens [B, 32]."""
        mel = self.mel(ref_clip)
        return self.speaker_encoder.tokenize(mel.to(self.decoder.model[0].weight.dtype))

    def decode(self, tokens: torch.Tensor, global_tokens: torch.Tensor) -> torch.Tensor:
        """Semantic tokens [B, T] and global tokens [B, 32] -> audio [B, 1, 320 T]."""
        d = self.speaker_encoder.detokenize(global_tokens)
        x = self.prenet(self.quantizer.decode(tokens), d) + d.unsqueeze(-1)
        return self.decoder(x)

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the mel spectrogram (no bfloat16 FFT on
        the CPU) and the speaker tokens' FSQ."""
        return [self.mel, self.speaker_encoder.quantizer]
