"""Configuration of NVIDIA's NanoCodec (NeMo's AudioCodecModel with a HiFi-GAN encoder, a
group FSQ and a causal HiFi-GAN decoder): 22.05 kHz mono; 0.6 kbps (4 x 4032 at 12.5 frames/s),
1.78 kbps (13 x 2016 at 12.5) and 1.89 kbps (8 x 2016 at 21.5).

The fields are the `.nemo` file's model_config.yaml (`audio_encoder`, `vector_quantizer`,
`audio_decoder` with NeMo's keyword arguments); `from_nemo` reads it, refusing the module
classes and options audiotok does not implement.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ...errors import ConfigError
from ..family import config_from_dict

ENCODER = "HiFiGANEncoder"
QUANTIZER = "GroupFiniteScalarQuantizer"
DECODER = "CausalHiFiGANDecoder"


@dataclass(frozen=True)
class NanoCodecConfig:
    sample_rate: int = 22050
    down_sample_rates: tuple[int, ...] = (2, 3, 6, 7, 7)
    encoder_channels: int = 24  # the encoder's first width, doubled at each rate
    encoder_pad_mode: str = "replicate"
    num_groups: int = 4
    levels: tuple[int, ...] = (9, 8, 8, 7)  # FSQ levels of each group's dimensions
    up_sample_rates: tuple[int, ...] = (7, 7, 6, 3, 2)
    decoder_channels: int = 864  # the decoder's first width, halved at each rate
    resblock_kernels: tuple[int, ...] = (3, 7, 11)
    resblock_dilations: tuple[int, ...] = (1, 3, 5)
    encoder_kernels: tuple[int, int] = (7, 7)  # in, out
    decoder_kernels: tuple[int, int] = (7, 3)

    def __post_init__(self):
        if math.prod(self.down_sample_rates) != math.prod(self.up_sample_rates):
            raise ConfigError(f"down_sample_rates {list(self.down_sample_rates)} and "
                              f"up_sample_rates {list(self.up_sample_rates)} differ in product")
        n = len(self.up_sample_rates)
        if self.decoder_channels % 2**n or self.decoder_channels >> n < 2:
            raise ConfigError(f"decoder_channels {self.decoder_channels} must halve {n} times "
                              "and leave 2 channels or more (HalfSnake needs a snake channel)")
        if self.encoder_pad_mode not in ("replicate", "reflect", "zeros"):
            raise ConfigError(f"encoder pad_mode {self.encoder_pad_mode!r}")
        if self.num_groups < 1 or not self.levels or min(self.levels) < 2:
            raise ConfigError("the FSQ needs groups and at least 2 levels a dimension")

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.down_sample_rates)

    @property
    def latent_dim(self) -> int:
        return self.num_groups * len(self.levels)

    @property
    def codebook_size(self) -> int:
        return math.prod(self.levels)

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> NanoCodecConfig:
        return config_from_dict(cls, d, "NanoCodec")

    @classmethod
    def from_nemo(cls, d: dict) -> NanoCodecConfig:
        """A .nemo's model_config.yaml."""
        try:
            enc, vq, dec = d["audio_encoder"], d["vector_quantizer"], d["audio_decoder"]
            for part, want in ((enc, ENCODER), (vq, QUANTIZER), (dec, DECODER)):
                got = str(part.get("_target_", "")).rsplit(".", 1)[-1]
                if got != want:
                    raise ConfigError(f"NanoCodec needs NeMo's {want}, this model has {got!r}")
            if enc.get("activation", "lrelu") != "lrelu" or \
                    dec.get("activation", "lrelu") != "half_snake" or \
                    dec.get("output_activation", "tanh") != "clamp" or \
                    not dec.get("n_groups_equal_to_out_channels", True):
                raise ConfigError("NanoCodec's activations are the encoder's lrelu, the "
                                  "decoder's half_snake and clamp, with grouped up-sampling")
            levels = tuple(vq["num_levels_per_group"])
            if int(enc["encoded_dim"]) != int(vq["num_groups"]) * len(levels) or \
                    int(dec["input_dim"]) != int(enc["encoded_dim"]):
                raise ConfigError("the encoder's, quantizer's and decoder's widths disagree")
            cfg = cls(
                sample_rate=int(d.get("sample_rate", 22050)),
                down_sample_rates=tuple(enc.get("down_sample_rates", (2, 2, 8, 8))),
                encoder_channels=int(enc.get("base_channels", 32)),
                encoder_pad_mode=str(enc.get("pad_mode", "reflect")),
                num_groups=int(vq["num_groups"]), levels=levels,
                up_sample_rates=tuple(dec.get("up_sample_rates", (8, 8, 2, 2))),
                decoder_channels=int(dec.get("base_channels", 512)),
                resblock_kernels=tuple(dec.get("resblock_kernel_sizes", (3, 7, 11))),
                resblock_dilations=tuple(dec.get("resblock_dilation_sizes", (1, 3, 5))),
                encoder_kernels=(int(enc.get("in_kernel_size", 7)),
                                 int(enc.get("out_kernel_size", 7))),
                decoder_kernels=(int(dec.get("in_kernel_size", 7)),
                                 int(dec.get("out_kernel_size", 3))))
            if tuple(enc.get("resblock_kernel_sizes", (3, 7, 11))) != cfg.resblock_kernels or \
                    tuple(enc.get("resblock_dilation_sizes", (1, 3, 5))) != \
                    cfg.resblock_dilations:
                raise ConfigError("the encoder's residual kernels differ from the decoder's")
            spf = d.get("samples_per_frame")
            if spf is not None and int(spf) != cfg.samples_per_frame:
                raise ConfigError(f"samples_per_frame {spf} is not the product of the rates")
            return cfg
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"bad NanoCodec model_config.yaml: {e!r}") from None


NANO_06 = NanoCodecConfig()
NANO_178 = NanoCodecConfig(num_groups=13, levels=(8, 7, 6, 6))
NANO_189 = NanoCodecConfig(down_sample_rates=(2, 2, 4, 8, 8), num_groups=8, levels=(8, 7, 6, 6),
                           up_sample_rates=(8, 8, 4, 2, 2))
