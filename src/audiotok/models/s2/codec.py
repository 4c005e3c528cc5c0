"""S2Codec: the S2 network behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...checkpoint import build_model
from ...codec import Codec
from ...streaming.spec import LAYERS, StreamSpec
from . import FAMILY
from .config import S2Config
from .model import S2Model
from .weights import checkpoint_file, load_checkpoint


class S2Codec(Codec):
    """Fish Audio's S2 Pro codec: 44.1 kHz mono <-> 1 semantic + N residual codebooks, causal."""

    family = FAMILY
    streaming = StreamSpec(decode=LAYERS, encode=LAYERS)
    frame_rule = "ceil"  # right-padded with zeros to a whole frame, as fish-speech does

    def __init__(self, model: S2Model, **kw):
        super().__init__(model, model.config, **kw)
        config = model.config
        self.sample_rate = config.sample_rate
        self.samples_per_frame = config.samples_per_frame
        self.num_codebooks = config.num_codebooks
        self.codebook_sizes = config.codebook_sizes

    @classmethod
    def from_checkpoint(cls, path: Path, config: S2Config | None = None, **kw) -> S2Codec:
        """Load any supported S2 checkpoint (see weights.py); `config` overrides the file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(S2Model, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def _encode_batch(self, audio: torch.Tensor) -> torch.Tensor:
        return self._encode_causal(audio)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_causal(tokens)
