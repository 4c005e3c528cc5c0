"""S2Codec: the S2 network behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...checkpoint import load_into
from ...codec import Codec
from ...nn.streaming import stream_copy, streaming
from . import FAMILY
from .config import S2Config
from .model import S2Model
from .weights import checkpoint_file, load_checkpoint


class S2Codec(Codec):
    """Fish Audio's S2 Pro codec: 44.1 kHz mono <-> 1 semantic + N residual codebooks, causal."""

    family = FAMILY
    causal = True
    frame_rule = "ceil"  # right-padded with zeros to a whole frame, as fish-speech does
    # Long inputs run through the streaming path in pieces of this many frames (exact, since the
    # codec is causal): bounded memory, and faster than one huge pass on CPU. None: one pass,
    # as with CUDA graphs.
    encode_chunk_frames: int | None = 32
    decode_chunk_frames: int | None = 32

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
        with torch.device("meta"):  # no memory for weights about to be replaced
            model = S2Model(config)
        load_into(model, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def _encode_batch(self, audio: torch.Tensor) -> torch.Tensor:
        chunk = self.encode_chunk_frames
        if self.graphs is not None or chunk is None or \
                audio.shape[-1] <= chunk * self.samples_per_frame:
            return self._run("encode", self.model.encode, audio)
        model = stream_copy(self.model)
        with streaming(model):
            return torch.cat([model.encode(piece)
                              for piece in audio.split(chunk * self.samples_per_frame, -1)], -1)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        # causal: the padding after an item cannot reach it
        chunk = self.decode_chunk_frames
        if self.graphs is not None or chunk is None or tokens.shape[-1] <= chunk:
            return self._run("decode", self.model.decode, tokens)
        spf = self.samples_per_frame
        out = torch.empty(tokens.shape[0], 1, tokens.shape[-1] * spf, device=tokens.device)
        model = stream_copy(self.model)
        with streaming(model):
            for i, piece in enumerate(tokens.split(chunk, -1)):
                out[..., i * chunk * spf : (i * chunk + piece.shape[-1]) * spf] = \
                    model.decode(piece)
        return out
