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


def decode_context(cfg: SnacConfig) -> tuple[int, int]:
    """(left, right): the coarse frames before and after a frame whose codes reach its audio,
    by following the decoder's layers back from the frame's samples (each convolution's taps,
    each transposed convolution's inputs, whole attention windows), the most over a frame's
    places in an attention window; a window with that much context on each side decodes the
    frame as the whole sequence does. Rounded up to whole attention windows (the windows
    must start on one)."""
    align = cfg.pad_frames
    spans = [_frame_span(cfg, 64 * align + k) for k in range(align)]
    left, right = max(s[0] for s in spans), max(s[1] for s in spans)
    return -(-left // align) * align, -(-right // align) * align


def _frame_span(cfg: SnacConfig, frame: int) -> tuple[int, int]:
    s0, hop = cfg.vq_strides[0], cfg.hop_length
    a, b = frame * hop * s0, (frame + 1) * hop * s0 - 1  # the frame's samples
    a, b = a - 3, b + 3  # the last k7 convolution
    for stride in reversed(cfg.decoder_rates):
        a, b = a - 3 * (1 + 3 + 9), b + 3 * (1 + 3 + 9)  # residual units, dilations 1, 3, 9
        pad, kernel = -(-stride // 2), 2 * stride  # transposed conv: out j = i s - pad + m
        a, b = -((-(a + pad - kernel + 1)) // stride), (b + pad) // stride
    if cfg.attn_window_size is not None:
        w = cfg.attn_window_size
        a, b = a // w * w, b // w * w + w - 1
    a, b = a - 3, b + 3  # the depthwise k7 convolution at the latent rate
    return frame - a // s0, b // s0 - frame
