"""Configuration of Mimi (Kyutai's streaming codec).

Every width, rate and layer count comes from here; `MIMI` is the released model (transformers'
`MimiConfig()` defaults, moshi's `loaders._mimi_config`). `to_dict` / `from_dict` is what a saved
model's `config.json` holds; `from_hf` reads a transformers `MimiConfig` dictionary.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ...errors import ConfigError
from ..family import config_from_dict


@dataclass(frozen=True)
class MimiConfig:
    sample_rate: int = 24000
    channels: int = 1
    dimension: int = 512  # SEANet latent and transformer width
    n_filters: int = 64
    ratios: tuple[int, ...] = (8, 6, 5, 4)  # decoder order; the encoder runs them reversed
    kernel_size: int = 7
    residual_kernel_size: int = 3
    last_kernel_size: int = 3
    compress: int = 2
    num_layers: int = 8  # per transformer (encoder and decoder)
    num_heads: int = 8
    head_dim: int = 64
    intermediate_size: int = 2048
    context: int = 250  # attention window in transformer steps (25 Hz)
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    downsample_stride: int = 2  # 25 Hz SEANet rate -> 12.5 Hz frames
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32  # all codebooks the weights hold
    num_semantic_quantizers: int = 1

    def __post_init__(self):
        if self.dimension != self.num_heads * self.head_dim:
            raise ConfigError(f"dimension {self.dimension} != num_heads {self.num_heads} x "
                              f"head_dim {self.head_dim}")
        if not 0 < self.num_semantic_quantizers < self.num_quantizers:
            raise ConfigError(f"num_semantic_quantizers must be 1..{self.num_quantizers - 1}")
        if self.channels != 1:
            raise ConfigError(f"only mono Mimi models are supported (channels={self.channels})")

    @property
    def hop_length(self) -> int:
        """Audio samples per SEANet step (960: 25 Hz)."""
        return math.prod(self.ratios)

    @property
    def samples_per_frame(self) -> int:
        return self.hop_length * self.downsample_stride

    @property
    def codebook_sizes(self) -> tuple[int, ...]:
        return (self.codebook_size,) * self.num_quantizers

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ratios"] = list(self.ratios)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MimiConfig:
        """Build from `to_dict` output; unknown keys are an error."""
        return config_from_dict(cls, d, "Mimi")

    @classmethod
    def from_hf(cls, d: dict) -> MimiConfig:
        """From a transformers MimiConfig dictionary (`config.json` of kyutai/mimi); missing
        keys take MimiConfig()'s defaults, as transformers does."""
        def get(key, default):
            value = d.get(key)
            return default if value is None else value

        hidden = get("hidden_size", 512)
        heads = get("num_attention_heads", 8)
        ratios = tuple(get("upsampling_ratios", [8, 6, 5, 4]))
        sample_rate = get("sampling_rate", 24000)
        encoder_rate = math.ceil(sample_rate / math.prod(ratios))
        frame_rate = d.get("frame_rate") or sample_rate / (math.prod(ratios) * 2)
        rope = d.get("rope_parameters") or {}
        checks = {"num_residual_layers": 1, "use_causal_conv": True, "pad_mode": "constant",
                  "trim_right_ratio": 1.0, "use_conv_shortcut": False, "hidden_act": "gelu",
                  "attention_bias": False, "num_key_value_heads": heads}
        for key, expected in checks.items():
            if d.get(key, expected) != expected:
                raise ConfigError(f"unsupported Mimi config: {key}={d[key]!r} (expected "
                                  f"{expected!r})")
        if d.get("upsample_groups", hidden) != hidden:
            raise ConfigError("unsupported Mimi config: upsample_groups must equal hidden_size")
        if get("vector_quantization_hidden_dimension", 256) != get("codebook_dim", 256):
            raise ConfigError("unsupported Mimi config: vector_quantization_hidden_dimension "
                              "must equal codebook_dim")
        return cls(
            sample_rate=sample_rate, channels=get("audio_channels", 1), dimension=hidden,
            n_filters=get("num_filters", 64), ratios=ratios,
            kernel_size=get("kernel_size", 7),
            residual_kernel_size=get("residual_kernel_size", 3),
            last_kernel_size=get("last_kernel_size", 3), compress=get("compress", 2),
            num_layers=get("num_hidden_layers", 8), num_heads=heads,
            head_dim=get("head_dim", hidden // heads),
            intermediate_size=get("intermediate_size", 2048),
            context=get("sliding_window", 250),
            rope_base=float(rope.get("rope_theta", d.get("rope_theta", 10000.0))),
            norm_eps=get("norm_eps", 1e-5),
            downsample_stride=int(encoder_rate / frame_rate),
            codebook_size=get("codebook_size", 2048), codebook_dim=get("codebook_dim", 256),
            num_quantizers=get("num_quantizers", 32),
            num_semantic_quantizers=get("num_semantic_quantizers", 1),
        )


MIMI = MimiConfig()
