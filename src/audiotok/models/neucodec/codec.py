"""NeuCodecCodec: NeuCodec behind the common Codec API (X-Codec2's codec, other rates)."""

from __future__ import annotations

from pathlib import Path

from ...checkpoint import build_model
from ..xcodec2.codec import XCodec2Codec
from ..xcodec2.model import XCodec2Model
from . import FAMILY
from .config import NeuCodecConfig
from .weights import load_checkpoint


class NeuCodecCodec(XCodec2Codec):
    """NeuCodec: 16 kHz speech -> one FSQ token (65 536 codes) per 320 samples -> 24 kHz.

    Input is padded with 1..320 zeros as X-Codec2's, but the semantic features are framed
    without centre padding, so the last frame is dropped: N // 320 frames (none for under 320
    samples, which the reference cannot encode either)."""

    family = FAMILY
    frame_rule = "floor"

    @classmethod
    def from_checkpoint(cls, path: Path, config: NeuCodecConfig | None = None,
                        **kw) -> NeuCodecCodec:
        state_dict, config, source = load_checkpoint(Path(path), config)
        model = build_model(XCodec2Model, config, state_dict, source)
        return cls(model, source=source, **kw)

