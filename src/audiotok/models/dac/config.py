"""Configuration of DAC (Descript Audio Codec).

The fields are the `dac` package's `DAC(...)` keyword arguments, which its `weights*.pth` files
hold as their metadata ("kwargs"); `from_hf` reads a transformers `DacConfig` (config.json with
`model_type: "dac"`), `to_dict` / `from_dict` audiotok's own config.json (plus its `"codec"`
key). The released models: 44.1 kHz 8 kbps (`DAC_44KHZ`, also Dia's and Parler-TTS's codec),
24 kHz, 16 kHz, 44.1 kHz 16 kbps (latent 128, which transformers cannot express), and IBM's
DAC.speech v1.0 (24 kHz, 2 codebooks: 1.5 kbps).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from ...errors import ConfigError
from ..family import config_from_dict


@dataclass(frozen=True)
class DacConfig:
    encoder_dim: int = 64
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    latent_dim: int | None = None  # None: encoder_dim * 2 ** len(encoder_rates)
    decoder_dim: int = 1536
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    n_codebooks: int = 9
    codebook_size: int = 1024
    codebook_dim: int = 8
    sample_rate: int = 44100

    def __post_init__(self):
        if self.latent_dim is None:
            object.__setattr__(self, "latent_dim",
                               self.encoder_dim * 2 ** len(self.encoder_rates))
        if math.prod(self.encoder_rates) != math.prod(self.decoder_rates):
            raise ConfigError(f"encoder_rates {list(self.encoder_rates)} and decoder_rates "
                              f"{list(self.decoder_rates)} must have the same product (the hop)")
        if self.decoder_dim % 2 ** len(self.decoder_rates):
            raise ConfigError(f"decoder_dim {self.decoder_dim} must halve "
                              f"{len(self.decoder_rates)} times")
        for name in ("encoder_dim", "decoder_dim", "n_codebooks", "codebook_size",
                     "codebook_dim", "sample_rate"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got "
                                  f"{getattr(self, name)!r}")

    @property
    def hop_length(self) -> int:
        """Audio samples per frame."""
        return math.prod(self.encoder_rates)

    def decoded_samples(self, frames: int) -> int:
        """Samples the decoder gives for `frames` frames: each transposed convolution (kernel
        2s, stride s, padding ceil(s / 2), no output padding) turns L steps into L * s, or
        L * s - 1 for an odd s; so 24 and 16 kHz (a stride of 5) give frames * 320 - 8."""
        n = frames
        for s in self.decoder_rates:
            n = n * s - s % 2
        return n

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("encoder_rates", "decoder_rates"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> DacConfig:
        """audiotok's config.json, or the `dac` package's kwargs (which add quantizer_dropout,
        a training setting, ignored)."""
        return config_from_dict(cls, {k: v for k, v in d.items() if k != "quantizer_dropout"},
                                "DAC")

    @classmethod
    def from_hf(cls, d: dict) -> DacConfig:
        """A transformers DacConfig (config.json); its latent width is always
        encoder_hidden_size * 2 ** len(downsampling_ratios)."""
        try:
            rates = tuple(d.get("downsampling_ratios", (2, 4, 8, 8)))
            return cls(encoder_dim=d.get("encoder_hidden_size", 64), encoder_rates=rates,
                       decoder_dim=d.get("decoder_hidden_size", 1536),
                       decoder_rates=tuple(d.get("upsampling_ratios", rates[::-1])),
                       n_codebooks=d.get("n_codebooks", 9),
                       codebook_size=d.get("codebook_size", 1024),
                       codebook_dim=d.get("codebook_dim", 8),
                       sample_rate=d.get("sampling_rate", 16000))
        except TypeError as e:
            raise ConfigError(f"bad transformers DAC config: {e}") from None


DAC_44KHZ = DacConfig()
DAC_24KHZ = DacConfig(encoder_rates=(2, 4, 5, 8), decoder_rates=(8, 5, 4, 2), n_codebooks=32,
                      sample_rate=24000)
DAC_16KHZ = replace(DAC_24KHZ, n_codebooks=12, sample_rate=16000)
DAC_44KHZ_16KBPS = DacConfig(latent_dim=128, n_codebooks=18)
DAC_SPEECH = replace(DAC_24KHZ, n_codebooks=2)  # IBM's DAC.speech v1.0 (OuteTTS 1.0's codec)
