"""Configuration of X-Codec2. The dictionary form follows transformers' `Xcodec2Config`
(the `config.json` of HKUSTAudio/xcodec2-hf), so either file can be read."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar

from ...errors import ConfigError


@dataclass(frozen=True)
class SemanticConfig:
    """The Wav2Vec2-BERT 2.0 conformer; only its first `num_hidden_layers` layers are used."""

    hidden_size: int = 1024
    num_hidden_layers: int = 16
    num_attention_heads: int = 16
    intermediate_size: int = 4096
    feature_projection_input_dim: int = 160
    conv_depthwise_kernel_size: int = 31
    left_max_position_embeddings: int = 64
    right_max_position_embeddings: int = 8
    layer_norm_eps: float = 1e-5


@dataclass(frozen=True)
class XCodec2Config:
    codec: ClassVar[str] = "xcodec2"  # the family's name, also transformers' model_type
    title: ClassVar[str] = "X-Codec2"

    sampling_rate: int = 16000
    encoder_hidden_size: int = 48
    downsampling_ratios: tuple[int, ...] = (2, 2, 4, 4, 5)
    hidden_size: int = 1024
    num_hidden_layers: int = 12
    num_attention_heads: int = 16
    head_dim: int = 64
    intermediate_size: int = 4096
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    quantization_dim: int = 2048
    quantization_levels: tuple[int, ...] = (4,) * 8
    semantic: SemanticConfig = field(default_factory=SemanticConfig)
    # The decoder's rate (NeuCodec: 24 kHz from the same 50 frames/s) and whether the semantic
    # features are framed with hop / 2 zeros on both sides (X-Codec2) or none (NeuCodec: one
    # frame fewer, each 160 samples later).
    output_sampling_rate: int = 16000
    semantic_centre: bool = True

    def __post_init__(self):
        if self.quantization_dim != self.hidden_size + self.semantic.hidden_size:
            raise ConfigError(f"quantization_dim {self.quantization_dim} must equal hidden_size "
                              f"{self.hidden_size} + semantic hidden size "
                              f"{self.semantic.hidden_size}")
        if self.sampling_rate != 16000 or self.hop_length != 320:
            raise ConfigError(f"sampling_rate {self.sampling_rate} and hop {self.hop_length} "
                              "(product of downsampling_ratios): the semantic features run at 50 "
                              "frames/s on 16 kHz audio, so these must be 16000 and 320")
        if self.hidden_size % 32:
            raise ConfigError(f"hidden_size {self.hidden_size} must be a multiple of 32 "
                              "(GroupNorm groups)")

    @property
    def hop_length(self) -> int:
        return math.prod(self.downsampling_ratios)

    @property
    def decoder_hop(self) -> int:
        """Output samples per frame at output_sampling_rate."""
        return self.hop_length * self.output_sampling_rate // self.sampling_rate

    @property
    def n_fft(self) -> int:
        return 4 * self.decoder_hop

    @property
    def codebook_size(self) -> int:
        return math.prod(self.quantization_levels)

    def to_dict(self) -> dict:
        """transformers-style dictionary (readable by `from_dict` and by `Xcodec2Config`)."""
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
             if k not in ("semantic", "rope_theta", "output_sampling_rate", "semantic_centre")}
        d["num_key_value_heads"] = self.num_attention_heads
        d["rope_parameters"] = {"rope_theta": self.rope_theta, "rope_type": "default"}
        d["semantic_model_config"] = {**asdict(self.semantic), "model_type": "wav2vec2-bert",
                                      "position_embeddings_type": "relative_key"}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> XCodec2Config:
        """From our config.json or transformers' Xcodec2Config JSON; unrelated keys are ignored,
        settings this implementation does not support are an error."""
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d and f.name != "semantic"}
        for k in ("downsampling_ratios", "quantization_levels"):
            if k in kw:
                kw[k] = tuple(kw[k])
        rope = d.get("rope_parameters") or {}
        if rope.get("rope_type", "default") != "default":
            raise ConfigError(f"unsupported rope_type {rope['rope_type']!r}")
        if "rope_theta" in rope or "rope_theta" in d:
            kw["rope_theta"] = float(rope.get("rope_theta", d.get("rope_theta")))
        kv = d.get("num_key_value_heads", kw.get("num_attention_heads"))
        if kv is not None and kv != kw.get("num_attention_heads", cls.num_attention_heads):
            raise ConfigError("grouped-query attention (num_key_value_heads != "
                              "num_attention_heads) is not supported")
        if d.get("attention_bias"):
            raise ConfigError("attention_bias=true is not supported")
        sem = d.get("semantic_model_config") or {}
        pos = sem.get("position_embeddings_type", "relative_key")
        if pos != "relative_key":
            raise ConfigError(f"semantic model position_embeddings_type {pos!r} is not supported")
        sem_kw = {f.name: sem[f.name] for f in fields(SemanticConfig) if f.name in sem}
        try:
            return cls(**kw, semantic=SemanticConfig(**sem_kw))
        except TypeError as e:
            raise ConfigError(f"bad X-Codec2 config: {e}") from None


XCODEC2 = XCodec2Config()
