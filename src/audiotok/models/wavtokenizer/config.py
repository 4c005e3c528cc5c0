"""Configuration of WavTokenizer (24 kHz, one codebook of 4096 at 75 or 40 frames/s).

The fields follow the reference's yaml (`feature_extractor`, `backbone`, `head` init_args) and
the SEANet encoder it builds (`EncodecFeatures`: non-causal, weight norm, reflect padding, a
2-layer LSTM, 32 filters). `ratios` is the yaml's `dowmsamples` (8 5 4 2: hop 320, 75 Hz;
6 5 5 4: hop 600, 40 Hz), in the decoder's order as SEANet takes it: the encoder runs them
reversed. `from_state_dict` reads every size from a checkpoint's tensors, so a `.ckpt` loads
without its yaml.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch

from ...errors import ConfigError
from ...nn.seanet import SEANetConfig
from ..family import config_from_dict


@dataclass(frozen=True)
class WavTokenizerConfig(SEANetConfig):
    """The SEANet encoder's fields (nn/seanet.SEANetConfig: non-causal, 512-wide latents) and
    the quantizer's and decoder's."""

    dimension: int = 512  # the latent's and the codebook's width
    causal: bool = False
    sample_rate: int = 24000
    # the quantizer: one Euclidean codebook
    codebook_size: int = 4096
    # the decoder: Vocos backbone (pos net with attention, ConvNeXt blocks) and iSTFT head
    dim: int = 768
    intermediate_dim: int = 2304
    num_layers: int = 12
    adanorm_embeddings: int = 4
    bandwidth_id: int = 0  # the AdaLayerNorm row decoding uses (the reference's, always 0)
    n_fft: int = 1280
    groups: int = 32  # the pos net's GroupNorm groups

    def __post_init__(self):
        super().__post_init__()
        if self.causal or self.norm != "weight_norm" or self.channels != 1:
            raise ConfigError("WavTokenizer's encoder is mono, non-causal, with weight norm")
        if not 0 <= self.bandwidth_id < self.adanorm_embeddings:
            raise ConfigError(f"bandwidth_id must be 0..{self.adanorm_embeddings - 1}, got "
                              f"{self.bandwidth_id}")
        if self.dim % self.groups:
            raise ConfigError(f"dim {self.dim} is not a multiple of {self.groups} groups")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ratios"] = list(d["ratios"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> WavTokenizerConfig:
        return config_from_dict(cls, d, "WavTokenizer")

    @classmethod
    def from_state_dict(cls, sd: Mapping[str, torch.Tensor]) -> WavTokenizerConfig:
        """The sizes of canonical weights (weights.py): strides from the strided convolutions'
        kernels (2 x stride), widths from the matrices, n_fft from the head's outputs."""
        try:
            enc = sorted(int(m[1]) for k in sd
                         if (m := re.match(r"encoder\.model\.(\d+)\.conv\.conv\.weight$", k)))
            strided = [sd[f"encoder.model.{i}.conv.conv.weight"] for i in enc]
            strided = [w for w in strided[1:-1] if w.shape[0] == 2 * w.shape[1]]
            layers = {int(m[1]) for k in sd if (m := re.match(r"backbone\.convnext\.(\d+)\.", k))}
            scale = sd["backbone.norm.scale.weight"]
            return cls(n_filters=sd["encoder.model.0.conv.conv.weight"].shape[0],
                       ratios=tuple(w.shape[-1] // 2 for w in reversed(strided)),
                       dimension=sd["quantizer.embed"].shape[-1],
                       codebook_size=sd["quantizer.embed"].shape[1],
                       dim=sd["backbone.embed.weight"].shape[0],
                       intermediate_dim=sd["backbone.convnext.0.pwconv1.weight"].shape[0],
                       num_layers=len(layers), adanorm_embeddings=scale.shape[0],
                       n_fft=sd["head.linear.weight"].shape[0] - 2)
        except (KeyError, IndexError) as e:
            raise ConfigError(f"not WavTokenizer weights (no tensor {e})") from None


# the released models: 75 frames/s (hop 320, n_fft 1280) and 40 frames/s (hop 600, n_fft 2400)
WAVTOKENIZER_75 = WavTokenizerConfig()
WAVTOKENIZER_40 = WavTokenizerConfig(ratios=(6, 5, 5, 4), n_fft=2400)
