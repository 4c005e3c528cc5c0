"""Configuration of EnCodec (Meta).

The fields follow the `encodec` package's SEANet and model arguments (`EncodecModel._get_model`,
`SEANetEncoder` / `SEANetDecoder` defaults); `from_hf` reads a transformers `EncodecConfig`
(config.json with `model_type: "encodec"`), `to_dict` / `from_dict` audiotok's own config.json.
`ENCODEC_24KHZ` is the 24 kHz causal model (the codec of Bark and VALL-E), `ENCODEC_32KHZ`
MusicGen's (hub `facebook/encodec_32khz`: not causal, 64 filters, ratios 8 5 4 4, identity
shortcuts, 4 codebooks of 2048), `ENCODEC_48KHZ` the 48 kHz stereo one (GroupNorm, 1 s
segments, normalised audio).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ...errors import ConfigError
from ...nn.seanet import SEANetConfig
from ..family import config_from_dict


@dataclass(frozen=True)
class EncodecConfig(SEANetConfig):
    """The SEANet fields (nn/seanet.SEANetConfig) and the model's own."""

    sample_rate: int = 24000
    bins: int = 1024
    target_bandwidths: tuple[float, ...] = (1.5, 3.0, 6.0, 12.0, 24.0)
    normalize: bool = False  # each segment scaled to unit rms before encoding
    segment: float | None = None  # seconds per segment (overlap-added), None: whole
    overlap: float = 0.01

    @property
    def frame_rate(self) -> int:
        """Frames a second as the package rounds it (for bandwidths: ceil)."""
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def n_q(self) -> int:
        """Codebooks the model holds: the top bandwidth's (`_get_model`)."""
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * 10))

    @property
    def kbps_per_codebook(self) -> float:
        """kbit/s one codebook adds (`get_bandwidth_per_quantizer`: 0.75 at 24 kHz)."""
        return math.log2(self.bins) * self.frame_rate / 1000

    def codebooks_for(self, bandwidth: float) -> int:
        """Codebooks of a target bandwidth in kbit/s (`get_num_quantizers_for_bandwidth`, in
        bit/s as it computes: 2.2 kbit/s at 32 kHz is exactly 4 codebooks)."""
        per_codebook = math.log2(self.bins) * self.frame_rate
        return int(max(1, math.floor(bandwidth * 1000 / per_codebook)))

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("ratios", "target_bandwidths"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> EncodecConfig:
        return config_from_dict(cls, d, "EnCodec")

    @classmethod
    def from_hf(cls, d: dict) -> EncodecConfig:
        """A transformers EncodecConfig (config.json)."""
        if d.get("pad_mode", "reflect") != "reflect" or d.get("codebook_dim") not in \
                (None, d.get("hidden_size", 128)):
            raise ConfigError("only the released EnCodec layout (reflect padding, codebooks of "
                              "the latent's width) is supported")
        try:
            return cls(sample_rate=d.get("sampling_rate", 24000),
                       channels=d.get("audio_channels", 1),
                       n_filters=d.get("num_filters", 32),
                       ratios=tuple(d.get("upsampling_ratios", (8, 5, 4, 2))),
                       dimension=d.get("hidden_size", 128),
                       bins=d.get("codebook_size", 1024),
                       target_bandwidths=tuple(d.get("target_bandwidths",
                                                     (1.5, 3.0, 6.0, 12.0, 24.0))),
                       causal=d.get("use_causal_conv", True),
                       norm=d.get("norm_type", "weight_norm"),
                       normalize=d.get("normalize", False),
                       segment=d.get("chunk_length_s"),
                       overlap=d.get("overlap") or 0.01,
                       lstm=d.get("num_lstm_layers", 2),
                       kernel_size=d.get("kernel_size", 7),
                       last_kernel_size=d.get("last_kernel_size", 7),
                       residual_kernel_size=d.get("residual_kernel_size", 3),
                       dilation_base=d.get("dilation_growth_rate", 2),
                       n_residual_layers=d.get("num_residual_layers", 1),
                       compress=d.get("compress", 2),
                       true_skip=not d.get("use_conv_shortcut", True),
                       trim_right_ratio=d.get("trim_right_ratio", 1.0))
        except TypeError as e:
            raise ConfigError(f"bad transformers EnCodec config: {e}") from None


ENCODEC_24KHZ = EncodecConfig()
ENCODEC_32KHZ = EncodecConfig(sample_rate=32000, n_filters=64, ratios=(8, 5, 4, 4), bins=2048,
                              target_bandwidths=(2.2,), causal=False, true_skip=True)
ENCODEC_48KHZ = EncodecConfig(sample_rate=48000, channels=2,
                              target_bandwidths=(3.0, 6.0, 12.0, 24.0), causal=False,
                              norm="time_group_norm", normalize=True, segment=1.0)
