"""MimiCodec: the Mimi network behind the common Codec API."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ...checkpoint import build_model
from ...codec import Codec, codebooks_setting
from ...errors import AudiotokError
from ...streaming.spec import LAYERS, StreamSpec
from . import FAMILY
from .config import MimiConfig
from .model import MimiModel
from .weights import checkpoint_file, load_checkpoint

PADDINGS = {
    "frame": "the input is zero-padded to whole 1920-sample frames (moshi >= 0.2.5; streaming "
             "gives the same tokens)",
    "layer": "each convolution pads its own input (transformers MimiModel, moshi <= 0.2.4, "
             "Sesame CSM)",
}


class MimiCodec(Codec):
    """Kyutai's Mimi: 24 kHz mono <-> 1 semantic + 31 acoustic codebooks of 2048, causal.

    codebooks: how many codebooks encode() returns (1..32, default all; Moshi uses 8);
    decode() takes any leading 1..32. padding: how a last partial frame is encoded, "frame"
    (default) or "layer" (see PADDINGS); the two differ only in that frame."""

    family = FAMILY
    frame_rule = "ceil"
    # causal both ways; long inputs in pieces of 64 frames (5.1 s: the faster size here,
    # benchmarks/codecs/compare.py --codec mimi)
    streaming = StreamSpec(decode=LAYERS, encode=LAYERS, pieces=64)

    def __init__(self, model: MimiModel, *, codebooks: int | None = None,
                 padding: str = "frame", **kw):
        super().__init__(model, model.config, **kw)
        config = model.config
        codebooks = codebooks_setting(codebooks, config.num_quantizers)
        if padding not in PADDINGS:
            raise AudiotokError(f"padding must be one of {', '.join(PADDINGS)}, got {padding!r}")
        self.padding = padding
        if padding == "layer":  # an encode stream's last frame padded by each convolution
            self.streaming = replace(self.streaming, end_padding="layers")
        self.model.encode_levels = codebooks
        self.sample_rate = config.sample_rate
        self.samples_per_frame = config.samples_per_frame
        self.num_codebooks = codebooks
        self.codebook_sizes = config.codebook_sizes[:codebooks]

    @classmethod
    def from_checkpoint(cls, path: Path, config: MimiConfig | None = None, **kw) -> MimiCodec:
        """Load any supported Mimi checkpoint (see weights.py); `config` overrides the file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(MimiModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    @property
    def all_codebook_sizes(self) -> tuple[int, ...]:
        return self.config.codebook_sizes

    @property
    def decode_codebooks(self) -> range:
        return range(1, self.config.num_quantizers + 1)

    def info(self) -> dict:
        return {**super().info(), "padding": self.padding}

    def _encode_batch(self, audio: torch.Tensor) -> torch.Tensor:
        return self._encode_causal(audio)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_causal(tokens)
