"""Qwen3TtsCodec: the Qwen3-TTS 12 Hz tokenizer behind the common Codec API."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...checkpoint import build_model
from ...codec import Codec
from ...errors import AudiotokError
from ...streaming.spec import LAYERS, StreamSpec
from . import FAMILY
from .config import Qwen3TtsConfig
from .model import Qwen3TtsModel
from .weights import checkpoint_file, load_checkpoint


class Qwen3TtsCodec(Codec):
    """Qwen3-TTS's 12 Hz tokenizer: 24 kHz mono <-> 16 codebooks of 2048 (1 semantic + 15
    acoustic) at 12.5 frames/s, causal end to end.

    Encoding is Mimi's (models/mimi), each convolution padding its own input as transformers'
    MimiModel does (the reference calls it so), so a last partial frame is the reference's and
    items of different lengths encode apart. attention: "full" (default) attends over every
    past step of the encoder transformer, as the reference runs under transformers' eager and
    SDPA attention (its 250-step window is honoured only by flash-attention 2); "window" keeps
    Mimi's 250 steps (flash-attention 2's result, and exact stream encoding). Decoding is one
    causal pass: exact, where the reference's decode re-decodes 300-frame chunks with 25 frames
    of left context (equal up to 300 frames, not beyond; see docs)."""

    family = FAMILY
    frame_rule = "ceil"
    # causal both ways; a last partial frame padded by each convolution, as transformers'
    # MimiModel (which the reference calls) pads it
    streaming = StreamSpec(decode=LAYERS, encode=LAYERS, end_padding="layers")

    def __init__(self, model: Qwen3TtsModel, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        self.attention = cfg.attention
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.samples_per_frame
        self.num_codebooks = cfg.num_quantizers
        self.codebook_sizes = (cfg.decoder.codebook_size,) * cfg.num_quantizers

    @classmethod
    def from_checkpoint(cls, path: Path, config: Qwen3TtsConfig | None = None, *,
                        attention: str | None = None, **kw) -> Qwen3TtsCodec:
        """Load the hub layout or audiotok's own (see weights.py); `config` overrides the
        file's, `attention` ("full" or "window") its encoder attention."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        if attention is not None:
            if attention not in ("full", "window"):
                raise AudiotokError(f"attention must be full or window, got {attention!r}")
            config = dataclasses.replace(config, attention=attention)
        model = build_model(Qwen3TtsModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def info(self) -> dict:
        return {**super().info(), "attention": self.attention}

    def stream_refusal(self, direction: str) -> str | None:
        """With full attention the encoder keeps every past step: no bounded stream state."""
        if direction == "encode" and self.attention != "window":
            return (f"{self.title} streams its encoder exactly with attention='window' only "
                    "(full attention keeps every past step); load it with attention='window' "
                    "(flash-attention 2's result), or encode whole inputs")
        return None

    def _encode_batch(self, audio: torch.Tensor) -> torch.Tensor:
        return self._run("encode", self.model.encode, audio)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_causal(tokens)
