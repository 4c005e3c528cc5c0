"""Configuration of SNAC (multi-scale neural audio codec).

The fields are the `snac` package's `SNAC(...)` keyword arguments, which is what the released
`config.json` files hold verbatim (`SNAC_24KHZ`, `SNAC_32KHZ`, `SNAC_44KHZ` below). `to_dict` /
`from_dict` read and write that form (plus audiotok's `"codec"` key).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ...errors import ConfigError
from ..family import config_from_dict


@dataclass(frozen=True)
class SnacConfig:
    sampling_rate: int = 24000
    encoder_dim: int = 48
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    latent_dim: int | None = None  # None: encoder_dim * 2 ** len(encoder_rates)
    decoder_dim: int = 1024
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    attn_window_size: int | None = None  # local attention window in latent frames
    codebook_size: int = 4096
    codebook_dim: int = 8
    vq_strides: tuple[int, ...] = (4, 2, 1)  # coarsest level first
    noise: bool = True
    depthwise: bool = True

    def __post_init__(self):
        if self.latent_dim is None:
            object.__setattr__(self, "latent_dim",
                               self.encoder_dim * 2 ** len(self.encoder_rates))
        coarse = self.vq_strides[0]
        if any(coarse % s for s in self.vq_strides):
            raise ConfigError(f"vq_strides {list(self.vq_strides)}: each must divide the first")
        for name, dim in (("latent_dim", self.latent_dim), ("decoder_dim", self.decoder_dim)):
            if self.attn_window_size is not None and dim % 64:
                raise ConfigError(f"{name} {dim} must be a multiple of 64 (attention heads of "
                                  "64)")
        if self.decoder_dim % 2 ** len(self.decoder_rates):
            raise ConfigError(f"decoder_dim {self.decoder_dim} must halve "
                              f"{len(self.decoder_rates)} times")

    @property
    def hop_length(self) -> int:
        """Audio samples per latent (finest) frame."""
        return math.prod(self.encoder_rates)

    @property
    def samples_per_frame(self) -> int:
        """Audio samples per coarse frame (one code of the coarsest level)."""
        return self.hop_length * self.vq_strides[0]

    @property
    def codes_per_level(self) -> tuple[int, ...]:
        """Codes of each level per coarse frame (24 kHz: 1, 2, 4)."""
        return tuple(self.vq_strides[0] // s for s in self.vq_strides)

    @property
    def num_codebooks(self) -> int:
        """Token rows per coarse frame: every level's codes of the frame (24 kHz: 7)."""
        return sum(self.codes_per_level)

    @property
    def pad_frames(self) -> int:
        """Coarse frames the input is padded to a multiple of: one, or with local attention
        the coarse frames of a whole attention window (the reference's preprocess)."""
        return math.lcm(self.vq_strides[0], self.attn_window_size or 1) // self.vq_strides[0]

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("encoder_rates", "decoder_rates", "vq_strides"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SnacConfig:
        """From a released config.json or `to_dict` output; unknown keys are an error."""
        return config_from_dict(cls, d, "SNAC")


SNAC_24KHZ = SnacConfig()
SNAC_32KHZ = SnacConfig(sampling_rate=32000, encoder_dim=64, encoder_rates=(2, 3, 8, 8),
                        decoder_dim=1536, decoder_rates=(8, 8, 3, 2), attn_window_size=32,
                        vq_strides=(8, 4, 2, 1))
# inferred (the spec, section 1): the 32 kHz configuration at 44.1 kHz (hop 384)
SNAC_44KHZ = SnacConfig(**{**SNAC_32KHZ.to_dict(), "sampling_rate": 44100,
                           "encoder_rates": (2, 3, 8, 8), "decoder_rates": (8, 8, 3, 2),
                           "vq_strides": (8, 4, 2, 1)})
