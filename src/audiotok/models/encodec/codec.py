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
    """EnCodec, mono: 24 kHz (up to 32 codebooks of 1024 at 75 frames/s; causal) and MusicGen's
    32 kHz (4 codebooks of 2048 at 50 frames/s; not causal).

    codebooks: how many codebooks encode() gives (default all, as the encodec package;
    transformers' default bandwidth gives 2 at 24 kHz); bandwidth: a target bandwidth in kbit/s
    instead (24 kHz: 1.5, 3, 6, 12, 24 -> 2, 4, 8, 16, 32 codebooks; 32 kHz: 2.2 -> 4).
    decode() takes any leading 1..n codebooks. The convolutions reflect-pad both ends of the
    input (at 24 kHz the first frames read up to 6 frames ahead, and the last frame is
    completed by reflection), so items of different lengths are encoded apart (a padded batch
    would change the shorter items' last frame) and decoded apart. Both decode as stateful
    streams; the causal 24 kHz model also encodes as one."""

    family = FAMILY
    stream_stateful = True  # decoder_stream(): the default of stream_decoder and the engine

    def __init__(self, model: EncodecModel, *, codebooks: int | None = None,
                 bandwidth: float | str | None = None, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        if cfg.channels != 1 or cfg.segment is not None:
            raise AudiotokError("the 48 kHz stereo EnCodec (segments, normalised audio) is not "
                                "supported yet; the 24 kHz and 32 kHz models are")
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
        self.encode_stateful = cfg.causal  # encoder_stream()

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
        """The stateful stream (models/encodec/stream.py): every frame decoded once; at 24 kHz
        the first audio once 7 frames are in, then each frame's 320 samples as it comes; at
        32 kHz the audio lags the codes by the layers' right padding (see docs)."""
        from .stream import decoder_stream

        return decoder_stream(self.model)

    def encoder_stream(self):
        """The causal model's stateful encoder stream (models/encodec/stream.py): the first
        tokens once 7 frames of audio are in, then each frame's as its samples come; the last
        partial frame at the end, completed by reflection as the offline encode does."""
        if not self.encode_stateful:
            return super().encoder_stream()
        from .stream import encoder_stream

        return encoder_stream(self.model)

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
