"""Configuration of DistillNeuCodec: NeuCodec's (models/neucodec/config.py) decoder and FSQ,
with DistilHuBERT (hubert_*) and a small convolutional and local-attention acoustic encoder
(acoustic_*) in place of Wav2Vec2-BERT and X-Codec2's acoustic encoder."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

from ...errors import ConfigError
from ...nn.hubert import HubertConfig
from ..family import config_from_dict
from ..neucodec.config import NeuCodecConfig


@dataclass(frozen=True)
class DistillNeuCodecConfig(NeuCodecConfig):
    """DistillNeuCodec: NeuCodec's decoder and FSQ; DistilHuBERT (hubert_*) and a small
    convolutional and local-attention acoustic encoder (acoustic_*) encode. The fields of the
    Wav2Vec2-BERT semantic model (`semantic`) are not used."""

    codec: ClassVar[str] = "distill-neucodec"
    title: ClassVar[str] = "DistillNeuCodec"

    hubert_conv_dims: tuple[int, ...] = (512,) * 7
    hubert_conv_kernels: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    hubert_conv_strides: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    hubert_hidden_size: int = 768
    hubert_heads: int = 12
    hubert_intermediate_size: int = 3072
    hubert_layers: int = 2
    hubert_pos_conv_kernel: int = 128
    hubert_pos_conv_groups: int = 16
    hubert_layer_norm_eps: float = 1e-5
    adapter_size: int = 1024
    acoustic_dims: tuple[int, ...] = (32, 64, 128, 256)
    acoustic_dim: int = 512
    acoustic_window: int = 300
    acoustic_compress: int = 5
    acoustic_depth: int = 5

    def __post_init__(self):
        if self.sampling_rate != 16000 or self.hop_length != 320:
            raise ConfigError("DistillNeuCodec takes 16 kHz audio, 320 samples a frame")
        hubert = math.prod(self.hubert_conv_strides)
        acoustic = 4 ** (len(self.acoustic_dims) - 1) * self.acoustic_compress
        if hubert != 320 or acoustic != 320:
            raise ConfigError(f"the semantic ({hubert}) and acoustic ({acoustic}) encoders must "
                              "both take 320 samples a frame")
        if self.hubert_hidden_size % self.hubert_heads or self.acoustic_dim % 4:
            raise ConfigError("hubert_hidden_size must be a multiple of hubert_heads, "
                              "acoustic_dim of 4")

    @property
    def hubert(self) -> HubertConfig:
        # (DistilHuBERT's: no projection norm, post-norm layers, no relative positions)
        own = ("projection_norm", "stable_layer_norm", "relative_buckets", "relative_distance")
        return HubertConfig(**{f.name: getattr(self, "hubert_" + f.name)
                               for f in fields(HubertConfig) if f.name not in own},
                            projection_norm=False)

    def to_dict(self) -> dict:
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
             if k not in ("semantic", "semantic_centre")}
        d["model_type"] = self.codec
        return d

    @classmethod
    def from_dict(cls, d: dict) -> DistillNeuCodecConfig:
        d = {k: v for k, v in d.items() if k != "model_type"}
        return config_from_dict(cls, d, cls.title)


DISTILL = DistillNeuCodecConfig()
