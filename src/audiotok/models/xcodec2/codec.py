"""XCodec2Codec: X-Codec2 behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import load_into
from ...codec import Codec
from .config import XCodec2Config
from .model import XCodec2Model
from .weights import CODEC_NAME, checkpoint_file, load_checkpoint

LICENCE = ("CC-BY-NC-4.0 licence (non-commercial use only; "
           "https://huggingface.co/HKUSTAudio/xcodec2)")


class XCodec2Codec(Codec):
    """X-Codec2: 16 kHz speech <-> one FSQ token (65 536 codes) per 320 samples."""

    name = CODEC_NAME
    title = "X-Codec2"
    licence = LICENCE

    def __init__(self, model: XCodec2Model, **kw):
        super().__init__(model, model.config, **kw)
        config = model.config
        self.sample_rate = config.sampling_rate
        self.samples_per_frame = config.hop_length
        self.num_codebooks = 1
        self.codebook_sizes = (config.codebook_size,)

    @classmethod
    def from_checkpoint(cls, path: Path, config: XCodec2Config | None = None,
                        **kw) -> XCodec2Codec:
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        with torch.device("meta"):  # weights come from the file; buffers are built on the CPU
            model = XCodec2Model(config)
        load_into(model, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def num_frames(self, num_samples: int) -> int:
        """Frames = N // 320 + 1: the audio is always padded with 1..320 zeros, as trained."""
        return num_samples // self.samples_per_frame + 1

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        frames = [self.num_frames(it.samples.numel()) for it in items]
        hop = self.samples_per_frame
        audio = torch.zeros(len(items), 1, max(frames) * hop, device=self.device, dtype=self.dtype)
        for i, it in enumerate(items):
            audio[i, 0, : it.samples.numel()] = it.samples.to(self.device, self.dtype)
        lengths = None if len(set(frames)) == 1 else torch.tensor(frames, device=self.device) * hop
        indices = self.model.encode(audio, lengths).cpu()
        return [indices[i : i + 1, :n] for i, n in enumerate(frames)]

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        frames = None if bool((lengths == tokens.shape[-1]).all()) else lengths
        return self.model.decode(tokens[:, 0], frames)
