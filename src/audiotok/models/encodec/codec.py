"""EncodecCodec: EnCodec behind the common Codec API (the 24 kHz mono model)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, codebooks_setting
from ...errors import AudiotokError
from . import FAMILY
from .config import EncodecConfig
from .model import EncodecModel
from .weights import checkpoint_file, load_checkpoint


class EncodecCodec(Codec):
    """EnCodec 24 kHz: mono audio <-> up to 32 codebooks of 1024 at 75 frames/s.

    codebooks: how many codebooks encode() gives (default all 32, as the encodec package;
    transformers' default bandwidth gives 2); bandwidth: a target bandwidth in kbit/s instead
    (1.5, 3, 6, 12, 24 -> 2, 4, 8, 16, 32 codebooks). decode() takes any leading 1..32.
    The model is causal, but its convolutions reflect-pad both ends of the input (the first
    frames read up to 6 frames ahead, and the last frame is completed by reflection), so items
    of different lengths are encoded apart (a padded batch would change the shorter items'
    last frame) and decoded apart."""

    family = FAMILY
    stream_stateful = True  # decoder_stream(): the default of stream_decoder and the engine

    def __init__(self, model: EncodecModel, *, codebooks: int | None = None,
                 bandwidth: float | str | None = None, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        if cfg.channels != 1 or cfg.segment is not None:
            raise AudiotokError("the 48 kHz stereo EnCodec (segments, normalised audio) is not "
                                "supported yet; the 24 kHz model is")
        if codebooks is not None and bandwidth is not None:
            raise AudiotokError("give codebooks or bandwidth, not both")
        if bandwidth is not None:
            try:
                bw = float(bandwidth)
            except (TypeError, ValueError):
                bw = None
            if bw not in cfg.target_bandwidths:
                raise AudiotokError(f"bandwidth must be one of {list(cfg.target_bandwidths)} "
                                    f"kbit/s, got {bandwidth!r}")
            codebooks = cfg.codebooks_for(bw)
        codebooks = codebooks_setting(codebooks, cfg.n_q)
        self.model.encode_levels = codebooks
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.hop_length
        self.num_codebooks = codebooks
        self.codebook_sizes = (cfg.bins,) * codebooks

    @classmethod
    def from_checkpoint(cls, path: Path, config: EncodecConfig | None = None,
                        **kw) -> EncodecCodec:
        """Load any supported EnCodec checkpoint (see weights.py); `config` overrides the
        file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(EncodecModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def decoder_stream(self):
        """The stateful stream (models/encodec/stream.py): every frame decoded once, the first
        audio once 7 frames are in, then each frame's 320 samples as it comes."""
        from .stream import decoder_stream

        return decoder_stream(self.model)

    @property
    def all_codebook_sizes(self) -> tuple[int, ...]:
        return (self.config.bins,) * self.config.n_q

    @property
    def decode_codebooks(self) -> range:
        return range(1, self.config.n_q + 1)

    @property
    def bandwidth(self) -> float:
        """kbit/s of the codebooks encode() gives."""
        return self.num_codebooks * self.config.kbps_per_codebook

    def info(self) -> dict:
        return {**super().info(), "bandwidth_kbps": self.bandwidth}

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Items of one length run as a batch, each length on its own (the reflection at the
        end reaches the last frame)."""
        return self._encode_by_length(items, [it.samples.numel() for it in items])

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_by_length(tokens, lengths)
