"""Configuration of the S2 codec (Fish Audio's modded DAC).

Every width, rate and layer count comes from here; `S2_PRO` is the released S2 Pro codec. The
dictionary form (`to_dict` / `from_dict`) is what `config.json` holds in a saved model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from ...errors import ConfigError


@dataclass(frozen=True)
class RVQTransformerConfig:
    """The quantizer's pre/post transformers (both have this shape)."""

    n_layer: int = 8
    n_head: int = 16
    dim: int = 1024
    intermediate_size: int = 3072
    head_dim: int = 64
    n_local_heads: int = -1
    window_size: int = 128
    rope_base: float = 10000.0
    norm_eps: float = 1e-5


@dataclass(frozen=True)
class S2Config:
    sample_rate: int = 44100
    encoder_dim: int = 64
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    latent_dim: int = 1024
    decoder_dim: int = 1536
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    encoder_transformer_layers: tuple[int, ...] = (0, 0, 0, 4)
    encoder_transformer_window: int = 512
    transformer_head_dim: int = 64
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    quantizer_input_dim: int = 1024
    residual_codebooks: int = 9
    residual_codebook_size: int = 1024
    codebook_dim: int = 8
    semantic_codebook_size: int = 4096
    quantizer_downsample_factor: tuple[int, ...] = (2, 2)
    rvq_transformer: RVQTransformerConfig = field(default_factory=RVQTransformerConfig)

    def __post_init__(self):
        if len(self.encoder_transformer_layers) != len(self.encoder_rates):
            raise ConfigError(
                f"encoder_transformer_layers has {len(self.encoder_transformer_layers)} entries "
                f"but encoder_rates has {len(self.encoder_rates)}"
            )
        if self.decoder_dim % 2 ** len(self.decoder_rates):
            raise ConfigError(f"decoder_dim {self.decoder_dim} is not divisible by "
                              f"2**{len(self.decoder_rates)}")
        if self.hop_length != math.prod(self.decoder_rates):
            raise ConfigError(f"encoder rates {self.encoder_rates} and decoder rates "
                              f"{self.decoder_rates} give different hop lengths")

    @property
    def hop_length(self) -> int:
        """Audio samples per latent step."""
        return math.prod(self.encoder_rates)

    @property
    def samples_per_frame(self) -> int:
        """Audio samples per code frame (2048 for S2 Pro)."""
        return self.hop_length * math.prod(self.quantizer_downsample_factor)

    @property
    def num_codebooks(self) -> int:
        return 1 + self.residual_codebooks

    @property
    def codebook_sizes(self) -> tuple[int, ...]:
        residual = (self.residual_codebook_size,) * self.residual_codebooks
        return (self.semantic_codebook_size, *residual)

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> S2Config:
        """Build from `to_dict` output; descriptive string entries (as in the golden configs) are
        ignored, unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        rvq_known = {f.name for f in fields(RVQTransformerConfig)}
        kw = {}
        for k, v in d.items():
            if k in known:
                kw[k] = tuple(v) if isinstance(v, list) else v
            elif not (isinstance(v, str) or k in _IGNORED_KEYS):
                raise ConfigError(f"unknown S2 codec config key {k!r}")
        rvq = kw.get("rvq_transformer")
        if isinstance(rvq, dict):
            unknown = set(rvq) - rvq_known
            if unknown:
                raise ConfigError(f"unknown rvq_transformer config keys {sorted(unknown)}")
            kw["rvq_transformer"] = RVQTransformerConfig(**rvq)
        try:
            return cls(**kw)
        except TypeError as e:
            raise ConfigError(f"bad S2 codec config: {e}") from None


# Descriptive keys written by other tools (never used to build the model).
_IGNORED_KEYS = {"codec", "format_version", "decoder_transformer_layers"}

S2_PRO = S2Config()
