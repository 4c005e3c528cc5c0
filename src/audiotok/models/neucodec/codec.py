"""NeuCodecCodec: NeuCodec behind the common Codec API (X-Codec2's codec, other rates)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ..xcodec2.codec import XCodec2Codec
from ..xcodec2.model import XCodec2Model
from . import FAMILY
from .config import DistillNeuCodecConfig, NeuCodecConfig
from .distill import DistillNeuCodecModel
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
        """NeuCodec, or DistillNeuCodec when the checkpoint holds it."""
        state_dict, config, source = load_checkpoint(Path(path), config)
        if isinstance(config, DistillNeuCodecConfig):
            model = build_model(DistillNeuCodecModel, config, state_dict, source)
            return DistillNeuCodecCodec(model, source=source, **kw)
        model = build_model(XCodec2Model, config, state_dict, source)
        return cls(model, source=source, **kw)


class DistillNeuCodecCodec(NeuCodecCodec):
    """DistillNeuCodec: NeuCodec's tokens and decoder, a smaller encoder (DistilHuBERT and a
    local-attention acoustic encoder): N // 320 + 1 frames. Its encoder normalises over whole
    items, so items run whole, those of one padded length as a batch."""

    frame_rule = "plus_one"
    window_frames = None

    @property
    def name(self) -> str:
        return DistillNeuCodecConfig.codec

    @property
    def title(self) -> str:
        return DistillNeuCodecConfig.title

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        lengths = [self.num_frames(it.samples.numel()) * self.input_samples_per_frame
                   for it in items]
        return [t[None] for t in self._encode_by_length(items, lengths)]
