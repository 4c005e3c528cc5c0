"""Configuration of NeuCodec: X-Codec2's (models/xcodec2/config.py) with a decoder at 24 kHz
(hop 480, n_fft 1920) and semantic features framed without centre padding. The dictionary
form follows transformers' `NeuCodecConfig` (input_sampling_rate, output_sampling_rate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...errors import ConfigError
from ..xcodec2.config import XCodec2Config


@dataclass(frozen=True)
class NeuCodecConfig(XCodec2Config):
    codec: ClassVar[str] = "neucodec"
    title: ClassVar[str] = "NeuCodec"

    output_sampling_rate: int = 24000
    semantic_centre: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.output_sampling_rate != 24000 or self.semantic_centre:
            raise ConfigError("NeuCodec decodes at 24000 Hz and frames its semantic features "
                              "without centre padding")

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["input_sampling_rate"] = d.pop("sampling_rate")
        d["output_sampling_rate"] = self.output_sampling_rate
        d["model_type"] = "neucodec"
        return d

    @classmethod
    def from_dict(cls, d: dict) -> NeuCodecConfig:
        d = dict(d)
        d.pop("semantic_centre", None)
        if "input_sampling_rate" in d:
            d["sampling_rate"] = d.pop("input_sampling_rate")
        return super().from_dict(d)


NEUCODEC = NeuCodecConfig()
