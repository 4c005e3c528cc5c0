"""The X-Codec network (Higgs Audio v2's tokenizer and X-Codec v1): a DAC encoder and a HuBERT
"semantic" branch, concatenated, projected (fc_prior) and quantised by a Euclidean residual VQ;
decoding takes the quantised latents through fc_post2 and a DAC decoder (odd strides padded to
whole frames, no tanh). No part is causal.

Module names are the original code's (Boson's `HiggsAudioTokenizer`, X-Codec's `SoundStream`)
with weight norm folded, except the quantizer's (nn/seanet.EuclideanResidualVQ: one `embed`
[n_q, bins, dim]); weights.py maps transformers' names and the quantizer's onto them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.hubert import Hubert
from ...nn.resample import SincResample
from ...nn.seanet import EuclideanResidualVQ
from ...nn.snake_blocks import Decoder, Encoder
from .config import SEMANTIC_PAD, SEMANTIC_RATE, XCodecConfig


class SemanticUnit(nn.Module):
    """x + conv1x1(ELU(conv_k3(ELU(x)))), both without bias."""

    def __init__(self, dim: int):
        super().__init__()
        self.conv1 = nn.Module()
        self.conv1.conv = nn.Conv1d(dim, dim, 3, padding=1, bias=False)
        self.conv2 = nn.Conv1d(dim, dim, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1.conv(F.elu(x))))


class SemanticBlock(nn.Module):
    """Two units, then a k3 convolution with bias."""

    def __init__(self, dim: int):
        super().__init__()
        self.res_units = nn.ModuleList(SemanticUnit(dim) for _ in range(2))
        self.conv = nn.Module()
        self.conv.conv = nn.Conv1d(dim, dim, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv.conv(x)


class SemanticEncoder(nn.Module):
    """HuBERT's averaged hidden states [B, D, T] -> [B, D, T]: a k3 convolution (no bias),
    two blocks."""

    def __init__(self, dim: int):
        super().__init__()
        self.conv = nn.Module()
        self.conv.conv = nn.Conv1d(dim, dim, 3, padding=1, bias=False)
        self.conv_blocks = nn.ModuleList(SemanticBlock(dim) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class XCodecModel(nn.Module):
    """encode(audio [B, 1, N], pad) -> codes [B, encode_levels, T]; decode(codes [B, k, T],
    any leading k codebooks) -> audio [B, 1, T * hop]."""

    def __init__(self, cfg: XCodecConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg.encoder_dim, cfg.ratios, cfg.latent_dim)
        self.semantic_model = Hubert(cfg.hubert)
        self.encoder_semantic = SemanticEncoder(cfg.semantic_dim)
        width = cfg.quantizer_dim
        self.fc_prior = nn.Linear(width, width)
        self.quantizer = EuclideanResidualVQ(
            cfg.n_q, cfg.codebook_size, cfg.codebook_dim or width, rule_product=False,
            width=width if cfg.codebook_dim else None)
        self.fc_post2 = nn.Linear(width, cfg.latent_dim)
        self.decoder_2 = Decoder(cfg.latent_dim, cfg.decoder_dim, cfg.ratios,
                                 odd_padding=True, tanh=False)
        self.resample = SincResample(cfg.sample_rate, SEMANTIC_RATE) \
            if cfg.sample_rate != SEMANTIC_RATE else None
        self.encode_levels = cfg.n_q  # the codec's `codebooks` setting

    def semantic(self, audio: torch.Tensor) -> torch.Tensor:
        """Audio [B, 1, N] -> the semantic encoder's output [B, semantic_dim, T]: HuBERT at
        16 kHz on the audio padded by 160 samples each side, its hidden states averaged, every
        semantic_downsample-th frame kept."""
        x = audio[:, 0]
        if self.resample is not None:
            x = self.resample(x)
        h = self.semantic_model(F.pad(x, (SEMANTIC_PAD, SEMANTIC_PAD)), average=True)
        return self.encoder_semantic(h[:, :: self.config.semantic_downsample].transpose(1, 2))

    def encode(self, audio: torch.Tensor, pad: int) -> torch.Tensor:
        """Codes of audio [B, 1, N]. Where the acoustic encoder would give one frame fewer than
        the semantic branch (the only difference a length can make: the codec checks it), it
        runs on the audio padded by `pad` zeros each side, and its frames past the semantic
        branch's are cut. The padding is arithmetic on N (pad x the frames missing), so an
        exported graph holds it for any length."""
        semantic = self.semantic(audio)
        t = semantic.shape[-1]
        p = pad * (t - acoustic_frames(self.config, audio.shape[-1]))
        acoustic = self.encoder(F.pad(audio, (p, p)))[..., :t]
        e = torch.cat([acoustic, semantic], 1)
        e = self.fc_prior(e.transpose(1, 2)).transpose(1, 2)
        return self.quantizer.encode(e, self.encode_levels)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        q = self.quantizer.decode(codes)
        return self.decoder_2(self.fc_post2(q.transpose(1, 2)).transpose(1, 2))

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the codebook search."""
        return [self.quantizer]


def acoustic_frames(cfg: XCodecConfig, samples: int) -> int:
    """Frames the DAC encoder gives for `samples` samples: each stride s (kernel 2s, padding
    ceil(s / 2)) turns n steps into (n + 2 ceil(s / 2) - 2s) // s + 1, written with a
    numerator that is never negative (an exported graph's integer division rounds towards
    zero, not down)."""
    n = samples
    for s in cfg.ratios:
        n = (n + 2 * (-(-s // 2)) - s) // s
    return n


def semantic_frames(cfg: XCodecConfig, samples: int) -> int:
    """Frames the semantic branch gives for `samples` samples (0: too short for HuBERT)."""
    n = -(-samples * SEMANTIC_RATE // cfg.sample_rate) + 2 * SEMANTIC_PAD
    for k, s in zip(cfg.hubert.conv_kernels, cfg.hubert.conv_strides, strict=True):
        n = max(0, (n - k) // s + 1)
    return -(-n // cfg.semantic_downsample)
