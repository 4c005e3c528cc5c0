"""XCodecCodec: the Higgs Audio v2 tokenizer and X-Codec behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, codebooks_setting
from ...errors import AudiotokError, ConfigError
from ...streaming.spec import STEPS, StreamSpec, Window
from . import FAMILY
from .config import SEMANTIC_PAD, XCodecConfig
from .model import XCodecModel, acoustic_frames, semantic_frames
from .weights import checkpoint_file, load_checkpoint

# Where the acoustic encoder would give another number of frames than the semantic branch
# (Higgs: 53 % of lengths), it runs on padded audio: "boson" pads 160 x semantic_downsample
# samples each side and cuts the longer branch (Boson's code, which Higgs Audio v2's LM was
# trained on); "transformers" pads hop / 2 (transformers' HiggsAudioV2TokenizerModel). The two
# agree for X-Codec (160 either way).
PADDINGS = ("boson", "transformers")


class XCodecCodec(Codec):
    """The X-Codec family: Higgs Audio v2's tokenizer (24 kHz mono <-> 8 codebooks of 1024 at
    25 frames/s) and X-Codec (16 kHz <-> 8 of 1024 at 50 frames/s).

    codebooks: how many codebooks encode() gives (the first n, default all; the references'
    bandwidth b kbps gives b / (10 bits x frame rate / 1000) of them); decode() takes any
    leading 1..all. padding: "boson" (default) or "transformers" (PADDINGS). A partial last
    frame counts once HuBERT gives it a frame (Higgs: 119 samples, X-Codec: 80); T frames
    decode to T * hop samples. Not causal (HuBERT's attention and GroupNorm see the whole
    input): items are encoded and decoded per length, so every item gets what it gets alone.
    The decoder reaches under 10 frames each side, so decode streams are exact."""

    family = FAMILY
    # decoded as steps (each layer once), or in windows of 10 frames' context each side (they
    # equal the offline decode); no encode stream
    streaming = StreamSpec(decode=STEPS, window=Window(10, 10, 10, exact=True))

    def __init__(self, model: XCodecModel, *, codebooks: int | None = None,
                 padding: str = "boson", **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        if padding not in PADDINGS:
            raise AudiotokError(f"padding must be one of {', '.join(PADDINGS)}, got {padding!r}")
        self.padding = padding
        self.model.encode_levels = codebooks_setting(codebooks, cfg.n_q)
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.hop_length
        self.num_codebooks = self.model.encode_levels
        self.codebook_sizes = (cfg.codebook_size,) * self.num_codebooks
        self.pad = SEMANTIC_PAD * cfg.semantic_downsample if padding == "boson" \
            else cfg.hop_length // 2
        self.min_samples = first_frame(cfg, self.pad)
        self.frame_rule = f"partial:{self.min_samples}"
        self.short_input_hint = "HuBERT needs a longer input"

    @classmethod
    def from_checkpoint(cls, path: Path, config: XCodecConfig | None = None, **kw
                        ) -> XCodecCodec:
        """Load any supported checkpoint (see weights.py); `config` overrides the file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(XCodecModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def step_stream(self, direction: str):
        """The decoder's stream (nn/stream_steps.py): every frame decoded once, each sample out
        once the codes it depends on have come."""
        from ...nn.stream_steps import DecoderStream, build

        model = self.model

        def latents(codes: torch.Tensor) -> torch.Tensor:
            q = model.quantizer.decode(codes)
            return model.fc_post2(q.transpose(1, 2)).transpose(1, 2)

        return DecoderStream(build(model.decoder_2.model), latents,
                             lambda frames: frames * self.samples_per_frame)

    @property
    def all_codebook_sizes(self) -> tuple[int, ...]:
        return (self.config.codebook_size,) * self.config.n_q

    @property
    def decode_codebooks(self) -> range:
        return range(1, self.config.n_q + 1)

    @property
    def title(self) -> str:
        return "Higgs Audio v2 tokenizer" if self.config.is_higgs else "X-Codec"

    @property
    def licence(self) -> str:
        if self.config.is_higgs:
            return ("Boson Higgs Audio 2 Community License (the bosonai/higgs-audio-v2-"
                    "tokenizer model card; services above 100,000 monthly users need a "
                    "separate licence from Boson AI); code: Apache-2.0")
        return ("not stated: the X-Codec weights (ZhenYe234/xcodec, hf-audio/xcodec-*) carry no "
                "licence; YuE's xcodec_mini_infer: Apache-2.0 (the YuE README)")

    def info(self) -> dict:
        return {**super().info(), "padding": self.padding}

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        return self._encode_by_length(items, [it.samples.numel() for it in items],
                                      lambda audio: self.model.encode(audio, self.pad))

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_by_length(tokens, lengths)


def first_frame(cfg: XCodecConfig, pad: int) -> int:
    """Samples a partial frame needs to count as one (HuBERT gives it a frame). Checks, over
    every remainder after a few numbers of whole frames, what the model's encode relies on:
    that rule, the acoustic encoder giving the semantic branch's frames or one fewer, and
    `pad` zeros each side making up that frame."""
    hop = cfg.hop_length
    need = next((r for r in range(1, hop + 1) if semantic_frames(cfg, r) >= 1), None)
    for k in (1, 2, 7):
        for r in range(hop):
            n = k * hop + r
            t, a = semantic_frames(cfg, n), acoustic_frames(cfg, n)
            if need is None or t != k + (r >= need) or t - a not in (0, 1) or \
                    acoustic_frames(cfg, n + 2 * pad * (t - a)) < t:
                raise ConfigError("the acoustic and semantic frames of this configuration do "
                                  f"not line up ({n} samples: {a} and {t} frames)")
    return need
