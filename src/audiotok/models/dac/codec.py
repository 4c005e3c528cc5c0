"""DacCodec: DAC behind the common Codec API."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, codebooks_setting
from ...errors import AudiotokError
from ...streaming.spec import STEPS, StreamSpec, Window
from . import FAMILY, outetts
from .config import DAC_SPEECH, DacConfig
from .model import DacModel
from .weights import checkpoint_file, load_checkpoint

# How an input that is not whole frames is encoded: "frame" zero-pads it to whole frames (the
# dac package's DAC.preprocess, Dia, Parler-TTS); "layer" does not pad (transformers' DacModel
# called without its feature extractor): the strided convolutions drop a partial last frame.
PADDINGS = ("frame", "layer")
# "plain": the model on the whole input; "outetts": OuteTTS 1.0's loudness normalisation, 5 s
# encode windows and 2048-frame decode chunks (outetts.py), for 24 kHz weights
PIPELINES = ("plain", "outetts")


class DacCodec(Codec):
    """DAC: mono audio <-> 9 (44.1 kHz), 32 (24 kHz) or 12 (16 kHz) codebooks of 1024.

    codebooks: how many codebooks encode() gives (the first n, default all); decode() takes any
    leading 1..all. padding: "frame" (default) or "layer" (PADDINGS). pipeline: "plain"
    (default) or "outetts" (PIPELINES; DAC.speech as OuteTTS 1.0 runs it). Not causal: a padded
    batch is encoded and decoded per length, so every item gets what it gets alone. Decoding T
    frames gives config.decoded_samples(T) samples: T * 512 at 44.1 kHz, T * 320 - 8 at 24 and
    16 kHz (their stride-5 transposed convolutions lose a sample each), as the references.
    DAC.speech (the 24 kHz model with 2 codebooks) carries its own title and licence."""

    family = FAMILY
    # decoded as steps, or in windows of 10 frames' context each side (they equal the offline
    # decode); no encode stream
    streaming = StreamSpec(decode=STEPS, window=Window(10, 10, 10, exact=True))

    def __init__(self, model: DacModel, *, codebooks: int | None = None,
                 padding: str = "frame", pipeline: str = "plain", **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        codebooks = codebooks_setting(codebooks, cfg.n_codebooks)
        if padding not in PADDINGS:
            raise AudiotokError(f"padding must be one of {', '.join(PADDINGS)}, got {padding!r}")
        if pipeline not in PIPELINES:
            raise AudiotokError(f"pipeline must be one of {', '.join(PIPELINES)}, got "
                                f"{pipeline!r}")
        if pipeline == "outetts" and (cfg.sample_rate != outetts.RATE or padding != "frame"):
            raise AudiotokError("pipeline='outetts' runs 24 kHz DAC weights (DAC.speech) with "
                                "padding='frame'")
        self.padding, self.pipeline = padding, pipeline
        self.model.encode_levels = codebooks
        self.sample_rate = cfg.sample_rate
        self.samples_per_frame = cfg.hop_length
        self.num_codebooks = codebooks
        self.codebook_sizes = (cfg.codebook_size,) * codebooks
        if padding == "layer":
            self.short_input_hint = "use padding='frame', which pads it to a whole frame"
            self.frame_rule = "floor"  # exactly so with even strides; num_frames counts

    @classmethod
    def from_checkpoint(cls, path: Path, config: DacConfig | None = None, **kw) -> DacCodec:
        """Load any supported DAC checkpoint (see weights.py); `config` overrides the file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(DacModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def step_stream(self, direction: str):
        """The decoder's stream (nn/stream_steps.py): every frame decoded once, each sample out
        once the codes it depends on have come (the decoder reaches about 10 frames ahead)."""
        from ...nn.stream_steps import DecoderStream, build

        model = self.model
        return DecoderStream(build(model.decoder.model), model.quantizer.decode,
                             model.config.decoded_samples)

    @property
    def all_codebook_sizes(self) -> tuple[int, ...]:
        return (self.config.codebook_size,) * self.config.n_codebooks

    @property
    def decode_codebooks(self) -> range:
        return range(1, self.config.n_codebooks + 1)

    @property
    def title(self) -> str:
        return "DAC.speech v1.0" if self.config == DAC_SPEECH else super().title

    @property
    def licence(self) -> str:
        if self.config == DAC_SPEECH:
            return ("CDLA-Permissive-2.0 (the ibm-research/DAC.speech.v1.0 model card; the "
                    "dac package's code: MIT)")
        return super().licence

    def info(self) -> dict:
        return {**super().info(), "padding": self.padding, "pipeline": self.pipeline}

    def stream_refusal(self, direction: str) -> str | None:
        if self.pipeline == "outetts":
            return ("pipeline='outetts' normalises the loudness of the whole decoded audio, so "
                    "it does not stream: load without it to stream DAC's own decode")
        return None

    def num_frames(self, num_samples: int) -> int:
        if self.padding == "frame":
            return super().num_frames(num_samples)
        n = num_samples  # the strided convolutions' arithmetic (kernel 2s, padding ceil(s / 2))
        for s in self.config.encoder_rates:
            n = max(0, (n + 2 * (-(-s // 2)) - 2 * s) // s + 1)
        return n

    def audio_lengths(self, lengths: torch.Tensor, num_samples: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """What the decoder gives for each item's frames (config.decoded_samples), at most the
        samples it was encoded from when known."""
        decoded = self.config.decoded_samples
        out = torch.tensor([outetts.decoded_length(n, decoded) if self.pipeline == "outetts"
                            else decoded(n) for n in lengths.cpu().tolist()])
        return out if num_samples is None else torch.minimum(num_samples.cpu(), out)

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Items of one (padded) length run as a batch (the same codes as alone); each length
        on its own (padding more than its own would change a non-causal item's codes)."""
        spf = self.samples_per_frame
        if self.pipeline == "outetts":
            return outetts.encode_items(items, self._encode_by_length, spf)
        sizes = [it.samples.numel() for it in items]
        return self._encode_by_length(items, [self.num_frames(n) * spf if self.padding == "frame"
                                              else n for n in sizes])

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.pipeline == "outetts":
            return outetts.decode_batch(tokens, lengths, self._decode_by_length,
                                        self.config.decoded_samples, self.samples_per_frame)
        return self._decode_by_length(tokens, lengths)
