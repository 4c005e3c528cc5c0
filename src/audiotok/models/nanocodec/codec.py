"""NanoCodecCodec: NVIDIA's NanoCodec behind the common Codec API."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec
from ...streaming.spec import LAYERS, StreamSpec
from . import FAMILY
from .config import NanoCodecConfig
from .model import NanoCodecModel
from .weights import checkpoint_file, load_checkpoint


class NanoCodecCodec(Codec):
    """NanoCodec: 22.05 kHz mono <-> 4 (0.6 kbps), 13 (1.78 kbps) or 8 (1.89 kbps) FSQ codebooks
    of 4032 or 2016.

    N samples are zero-padded to whole frames (ceil(N / samples_per_frame)), as NeMo pads them;
    T frames decode to T x samples_per_frame samples. The encoder is not causal (it reaches
    about 1.1 s ahead): items are encoded per padded length, so every item gets its codes alone.
    The decoder is causal: decode streams are exact, every frame decoded once."""

    family = FAMILY
    # long decodes run through the stream in pieces of 128 frames (10 s): the offline decode's
    # audio with bounded memory
    streaming = StreamSpec(decode=LAYERS, pieces=128)
    frame_rule = "ceil"

    def __init__(self, model: NanoCodecModel, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.samples_per_frame
        self.num_codebooks = cfg.num_groups
        self.codebook_sizes = (cfg.codebook_size,) * cfg.num_groups

    @classmethod
    def from_checkpoint(cls, path: Path, config: NanoCodecConfig | None = None, **kw
                        ) -> NanoCodecCodec:
        """Load a .nemo file or audiotok's save (weights.py); `config` overrides the file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(NanoCodecModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    @property
    def title(self) -> str:
        cfg = self.config
        kbps = cfg.num_groups * self.frame_rate * math.log2(cfg.codebook_size) / 1000
        return f"NanoCodec {round(kbps, 2):g} kbps"

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        spf = self.samples_per_frame
        return self._encode_by_length(items, [self.num_frames(it.samples.numel()) * spf
                                              for it in items])

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_causal(tokens)
