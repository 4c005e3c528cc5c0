"""DistillNeuCodecCodec: DistillNeuCodec behind the common Codec API (NeuCodec's codec with
another encoder)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ..neucodec.codec import NeuCodecCodec
from . import FAMILY
from .config import DistillNeuCodecConfig
from .model import DistillNeuCodecModel
from .weights import load_checkpoint


class DistillNeuCodecCodec(NeuCodecCodec):
    """DistillNeuCodec: NeuCodec's tokens and decoder, a smaller encoder: N // 320 + 1 frames.
    Its encoder normalises over whole items, so items run whole, those of one padded length as
    a batch; long inputs are not windowed."""

    family = FAMILY
    frame_rule = "plus_one"
    streaming = replace(NeuCodecCodec.streaming, long_window=None)  # items run whole

    @classmethod
    def from_checkpoint(cls, path: Path, config: DistillNeuCodecConfig | None = None,
                        **kw) -> DistillNeuCodecCodec:
        state_dict, config, source = load_checkpoint(Path(path), config)
        model = build_model(DistillNeuCodecModel, config, state_dict, source)
        return cls(model, source=source, **kw)

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        lengths = [self.num_frames(it.samples.numel()) * self.input_samples_per_frame
                   for it in items]
        return [t[None] for t in self._encode_by_length(items, lengths)]
