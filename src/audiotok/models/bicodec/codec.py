"""BiCodecCodec: Spark-TTS's BiCodec behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, Encoded, by_length
from ...errors import ConfigError
from ...streaming.spec import WINDOWS, StreamSpec, Window
from . import FAMILY
from .config import BiCodecConfig
from .frontend import encode_inputs
from .model import BiCodecModel
from .weights import load_checkpoint

# frames of context each side that make a window's audio the offline decode's (the
# detokenizer reaches 67 frames each way: every layer but the decoder's last is centred)
REACH = 67


class BiCodecCodec(Codec):
    """BiCodec: 16 kHz mono <-> semantic tokens (1 x 8192 at 50 frames/s) plus 32 global
    tokens per item (Codes.globals, 4096 each: the speaker, from a 6 s reference clip).

    N samples give (N - 400) // 320 + 1 frames (wav2vec2's convolutions; fewer than 400
    samples is an error); T frames decode to 320 T samples. Encoding follows Spark's tokenizer:
    the volume normalised (volume_normalize, on by default as Spark's config has it), the
    reference clip the item's first 6 s (repeated when shorter). Not causal: wav2vec2's
    attention sees the whole item, so items are encoded per length; decoding masks nothing
    either, so items decode per length. Decode streams re-decode windows of 67 frames of
    context each side: exactly the offline decode."""

    family = FAMILY
    streaming = StreamSpec(decode=WINDOWS, window=Window(REACH, 25, REACH, exact=True))
    frame_rule = "partial:400"
    short_input_hint = "BiCodec needs at least 400 samples (25 ms at 16 kHz)"

    def __init__(self, model: BiCodecModel, *, volume: str | None = None, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.hop_length
        self.num_codebooks = 1
        self.codebook_sizes = (cfg.codebook_size,)
        self.global_tokens = cfg.global_tokens
        self.global_codebook_size = cfg.global_codebook_size
        if volume not in (None, "normalize", "asis"):
            raise ConfigError(f"volume must be normalize or asis, got {volume!r}")
        # Spark's volume rule before tokenizing (its config's volume_normalize, on in the
        # release); volume="asis" tokenizes the audio as given
        self.volume_normalize = cfg.volume_normalize if volume is None else volume == "normalize"

    @classmethod
    def from_checkpoint(cls, path: Path, config: BiCodecConfig | None = None, **kw
                        ) -> BiCodecCodec:
        """Load Spark-TTS's model folder or audiotok's save (see weights.py)."""
        state_dict, config, source = load_checkpoint(Path(path), config)
        model = build_model(BiCodecModel, config, state_dict, source)
        return cls(model, source=source, **kw)

    def frontend_settings(self) -> dict:
        """frontend.encode_inputs' settings (an ONNX export's manifest holds them too)."""
        return {"ref_samples": self.model.config.ref_samples,
                "normalize_volume": self.volume_normalize}

    def info(self) -> dict:
        return {**super().info(), "volume_normalize": self.volume_normalize}

    def _encode_items(self, items: list[AudioItem]) -> Encoded:
        inputs = [encode_inputs(it.samples.numpy(), **self.frontend_settings()) for it in items]
        clips = torch.from_numpy(np.stack([x["ref_clip"] for x in inputs]))
        utterance = self._run("global", self.model.global_tokens, clips.to(self.device)).cpu()
        tokens: list[torch.Tensor | None] = [None] * len(items)
        for _, group in by_length([x["audio"].size for x in inputs]):
            batch = torch.from_numpy(np.stack([inputs[i]["audio"] for i in group]))
            batch = batch.to(self.device)
            got = self._run("encode", self.model.semantic_tokens, batch).cpu()
            for j, i in enumerate(group):
                tokens[i] = got[j][None]
        return Encoded(tokens, globals=list(utterance))

    def _decode_global(self, tokens: torch.Tensor, lengths: torch.Tensor, utterance: torch.Tensor
                       ) -> torch.Tensor:
        return self._decode_by_length(tokens, lengths, self._decode_rows, utterance)

    def _decode_rows(self, tokens: torch.Tensor, utterance: torch.Tensor) -> torch.Tensor:
        """model.decode of codes [B, 1, T] (semantic tokens) and their rows' global tokens."""
        return self.model.decode(tokens[:, 0], utterance)
