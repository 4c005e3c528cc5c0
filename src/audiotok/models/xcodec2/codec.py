"""XCodec2Codec: X-Codec2 behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...chunking import context_windows
from ...codec import Codec
from ...streaming.spec import WINDOWS, StreamSpec, Window
from . import FAMILY
from .config import XCodec2Config
from .model import XCodec2Model
from .weights import checkpoint_file, load_checkpoint


class XCodec2Codec(Codec):
    """X-Codec2: 16 kHz speech <-> one FSQ token (65 536 codes) per 320 samples."""

    family = FAMILY
    # Always padded with 1..320 zeros, as trained: frames = N // 320 + 1.
    frame_rule = "plus_one"
    # Decode streams re-decode windows (left, chunk, lookahead: measured, docs' serving page;
    # not exact: the model attends to the whole input). Offline, items longer than
    # long_window.chunk frames are processed in windows of that many frames with `left` frames
    # more on both sides whose output is discarded (an approximation; the docs' X-Codec2 page
    # measures its effect), so memory stays bounded.
    streaming = StreamSpec(decode=WINDOWS, window=Window(10, 25, 10),
                           long_window=Window(150, 1500, 150))

    def __init__(self, model: XCodec2Model, **kw):
        super().__init__(model, model.config, **kw)
        config = model.config
        self.sample_rate = config.output_sampling_rate
        self.samples_per_frame = config.decoder_hop
        self.input_rate = config.sampling_rate
        self.num_codebooks = 1
        self.codebook_sizes = (config.codebook_size,)

    @classmethod
    def from_checkpoint(cls, path: Path, config: XCodec2Config | None = None,
                        **kw) -> XCodec2Codec:
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(XCodec2Model, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def _is_long(self, frames: int) -> bool:
        long = self.streaming.long_window
        return long is not None and frames > long.chunk

    def _windows(self, frames: int):
        """(start, stop) of each window with context, and the slice of its output to keep."""
        long = self.streaming.long_window
        return context_windows(frames, long.chunk, long.left)

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        frames = [self.num_frames(it.samples.numel()) for it in items]
        out: list[torch.Tensor | None] = [None] * len(items)
        short = [i for i, n in enumerate(frames) if not self._is_long(n)]
        if short:
            for i, tokens in zip(short, self._encode_batch([items[i] for i in short]),
                                 strict=True):
                out[i] = tokens
        for i, n in enumerate(frames):
            if self._is_long(n):
                out[i] = self._encode_windowed(items[i], n)
        return out

    def _padded(self, items: list[AudioItem]) -> tuple[torch.Tensor, list[int]]:
        """Audio [B, 1, max P], each item padded with 1..hop zeros to P samples, as trained;
        and the frames of each item."""
        hop = self.input_samples_per_frame
        padded = [(it.samples.numel() // hop + 1) * hop for it in items]
        audio = torch.zeros(len(items), 1, max(padded), device=self.device)  # float32
        for i, it in enumerate(items):
            audio[i, 0, : it.samples.numel()] = it.samples.to(self.device)
        return audio, padded

    def _encode_batch(self, items: list[AudioItem]) -> list[torch.Tensor]:
        audio, padded = self._padded(items)
        frames = [self.num_frames(it.samples.numel()) for it in items]
        model = self.model
        if len(set(padded)) == 1:
            features, _ = model.features(audio)  # outside CUDA graphs: it syncs with the host
            indices = self._run("encode", lambda a, f: model.encode(a, features=f), audio,
                                features)
        else:
            lengths = torch.tensor(padded, device=self.device)
            features, mask = model.features(audio, lengths)
            indices = self._run("encode_padded",
                                lambda a, n, f, m: model.encode(a, n, features=f, mask=m),
                                audio, lengths, features, mask)
        indices = indices.cpu()
        return [indices[i : i + 1, :n] for i, n in enumerate(frames)]

    @property
    def audio_extra_frames(self) -> int:
        """Frames of padded audio beyond the frames of codes it gives (1 when the semantic
        features are framed without centre padding: NeuCodec's N // 320 codes from
        N // 320 + 1 padded frames)."""
        return 0 if self.model.config.semantic_centre else 1

    def _encode_windowed(self, item: AudioItem, frames: int) -> torch.Tensor:
        """Windows of one long item; the semantic features are those of the whole signal, and
        a window's audio has its frames of codes and audio_extra_frames more, as a whole
        item's."""
        audio, _ = self._padded([item])
        features, _ = self.model.features(audio)
        hop, extra = self.input_samples_per_frame, self.audio_extra_frames
        pieces = [self.model.encode(audio[..., a * hop : (b + extra) * hop],
                                    features=features[:, a:b])[:, keep].cpu()
                  for a, b, keep in self._windows(frames)]
        return torch.cat(pieces, -1)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if not self._is_long(tokens.shape[-1]):
            if bool((lengths == tokens.shape[-1]).all()):
                return self._run("decode", self.model.decode, tokens[:, 0])
            return self._run("decode_padded", self.model.decode, tokens[:, 0],
                             lengths.to(tokens.device))
        hop = self.samples_per_frame
        out = torch.zeros(tokens.shape[0], 1, tokens.shape[-1] * hop, device=tokens.device)
        for i, n in enumerate(lengths.tolist()):
            for a, b, keep in self._windows(n):
                audio = self.model.decode(tokens[i : i + 1, 0, a:b])
                start = (a + keep.start) * hop
                out[i, :, start : start + (keep.stop - keep.start) * hop] = \
                    audio[0, :, keep.start * hop : keep.stop * hop]
        return out
