"""WavTokenizerCodec: WavTokenizer behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec
from ...nn import seanet
from ...streaming.spec import WINDOWS, StreamSpec, Window
from . import FAMILY
from .config import WavTokenizerConfig
from .model import WavTokenizerModel
from .weights import checkpoint_file, load_checkpoint


class WavTokenizerCodec(Codec):
    """WavTokenizer: 24 kHz mono <-> one codebook of 4096 (75 or 40 frames/s).

    N samples give ceil(N / hop) frames (the encoder's convolutions complete the last frame by
    reflection, as the reference); T frames decode to T * hop samples. Not causal: the encoder
    reflects at both ends of each item and the decoder's attention and GroupNorm see every
    frame, so items are encoded and decoded per length (every item gets what it gets alone).
    No encode stream; decode streams re-decode windows (`streaming.window`), which approximate
    the offline decode (docs/codecs/wavtokenizer.md says how closely)."""

    family = FAMILY
    # windows of 25 frames a step with 25 frames of context each side (the server's default:
    # at 75 Hz the first audio after 50 frames, 0.67 s); the decoder's attention reaches every
    # frame, so no window is exact (docs/codecs/wavtokenizer.md measures how close)
    streaming = StreamSpec(decode=WINDOWS, window=Window(25, 25, 25))

    def __init__(self, model: WavTokenizerModel, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.hop_length
        self.num_codebooks = 1
        self.codebook_sizes = (cfg.codebook_size,)
        # inputs of two windows or more run the encoder's convolutions in windows this long
        # (_encode_long; None: in one pass, as the reference)
        self.encode_window_seconds: float | None = 2.0

    @classmethod
    def from_checkpoint(cls, path: Path, config: WavTokenizerConfig | None = None, **kw
                        ) -> WavTokenizerCodec:
        """Load any supported WavTokenizer checkpoint (see weights.py); `config` overrides the
        sizes read from the tensors."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(WavTokenizerModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        return self._encode_by_length(items, [it.samples.numel() for it in items],
                                      self._encode_long)

    def _encode_long(self, audio: torch.Tensor) -> torch.Tensor:
        """model.encode(audio); on the CPU, audio of two windows or more with the encoder's
        convolutions in overlapping windows (nn/seanet.latents_in_windows: the one pass's
        latents, each window's activations kept in the caches)."""
        seconds, hop = self.encode_window_seconds, self.samples_per_frame
        window = 0 if seconds is None else round(seconds * self.sample_rate / hop) * hop
        if self.device.type != "cpu" or not window or audio.shape[-1] < 2 * window:
            return self.model.encode(audio)
        model = self.model
        latents = seanet.latents_in_windows(model.encoder, audio.to(model.dtype), window)
        return model.quantizer.encode(latents.float(), 1)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_by_length(tokens, lengths)
