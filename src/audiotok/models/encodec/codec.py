"""EncodecCodec: EnCodec behind the common Codec API (24 and 32 kHz mono, 48 kHz stereo)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, Encoded, by_length, codebooks_setting
from ...errors import AudiotokError
from ...streaming.spec import SEGMENTS, STEPS, StreamSpec
from . import FAMILY, segments
from .config import EncodecConfig
from .model import EncodecModel
from .weights import checkpoint_file, load_checkpoint


class EncodecCodec(Codec):
    """EnCodec: 24 kHz mono (up to 32 codebooks of 1024 at 75 frames/s; causal), MusicGen's
    32 kHz mono (4 codebooks of 2048 at 50 frames/s; not causal) and 48 kHz stereo (up to 16
    codebooks of 1024 at 150 frames/s, in 1 s segments each with a scale: segments.py).

    codebooks: how many codebooks encode() gives (default all, as the encodec package;
    transformers' default bandwidth gives 2 at 24 kHz); bandwidth: a target bandwidth in kbit/s
    instead (24 kHz: 1.5, 3, 6, 12, 24 -> 2, 4, 8, 16, 32 codebooks; 32 kHz: 2.2 -> 4).
    decode() takes any leading 1..n codebooks. The convolutions reflect-pad both ends of the
    input (at 24 kHz the first frames read up to 6 frames ahead, and the last frame is
    completed by reflection), so items of different lengths are encoded apart (a padded batch
    would change the shorter items' last frame) and decoded apart. The mono models decode as
    stateful streams; the causal 24 kHz model also encodes as one; the 48 kHz model streams
    segment by segment both ways (segment_stream.py)."""

    family = FAMILY
    # the mono models decode long codes in pieces this long (_decode_mono)
    DECODE_PIECE_SECONDS = 2.0
    # the 24 kHz model's: decoded and encoded as steps; the others' in __init__ (SPECS)
    streaming = StreamSpec(decode=STEPS, encode=STEPS)

    def __init__(self, model: EncodecModel, *, codebooks: int | None = None,
                 bandwidth: float | str | None = None, **kw):
        super().__init__(model, model.config, **kw)
        cfg = model.config
        self.channels = cfg.channels
        self.segmented = cfg.segment is not None  # the 48 kHz model: see segments.py
        if self.segmented:
            self.frame_rule = segments.frame_rule(cfg)
        self.streaming = stream_spec(cfg)
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
        # the mono models encode inputs of 2 pieces or more in pieces this long (_encode_mono;
        # None: in one pass)
        self.encode_piece_seconds: float | None = None if self.segmented else 2.0

    @classmethod
    def from_checkpoint(cls, path: Path, config: EncodecConfig | None = None,
                        **kw) -> EncodecCodec:
        """Load any supported EnCodec checkpoint (see weights.py); `config` overrides the
        file's."""
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(EncodecModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def step_stream(self, direction: str):
        """The mono models' streams (models/encodec/stream.py). Decoding: every frame decoded
        once; at 24 kHz the first audio once 7 frames are in, then each frame's 320 samples as
        it comes; at 32 kHz the audio lags the codes by the layers' right padding (see docs).
        Encoding (the causal 24 kHz model): the first tokens once 7 frames of audio are in,
        then each frame's as its samples come; the last partial frame at the end, completed by
        reflection as the offline encode does."""
        from .stream import decoder_stream, encoder_stream

        return (decoder_stream if direction == "decode" else encoder_stream)(self.model)

    def segment_stream(self, direction: str):
        """The 48 kHz model's streams (segment_stream.py): each segment's tokens and scale once
        its samples are in; its audio once its frames, its scale and the frame after it are in.
        Audio is taken in float32 (a segment is scaled to unit rms before the model casts it,
        as the offline encode does)."""
        from .segment_stream import SegmentDecoderStream, SegmentEncoderStream

        return (SegmentDecoderStream if direction == "decode" else SegmentEncoderStream)(
            self.model)

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

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor] | Encoded:
        """Items of one length run as a batch, each length on its own (the reflection at the
        end reaches the last frame); the 48 kHz model's in segments, with their scales."""
        if not self.segmented:
            return self._encode_by_length(items, [it.samples.numel() for it in items],
                                          self._encode_mono)
        tokens: list = [None] * len(items)
        scales: list = [None] * len(items)
        for _, group in by_length([it.samples.shape[-1] for it in items]):
            audio = torch.stack([items[i].samples.to(self.device) for i in group])
            codes, factors = segments.encode(self.model, audio)
            for j, i in enumerate(group):
                tokens[i], scales[i] = codes[j].cpu(), factors[j].cpu()
        return Encoded(tokens, scales)

    def _encode_mono(self, audio: torch.Tensor) -> torch.Tensor:
        """model.encode(audio); on the CPU, audio of 2 pieces or more in pieces: the causal
        model's through its stream chain (stream.latents_in_pieces), the 32 kHz one's in
        overlapping windows (nn/seanet.py). A piece's activations stay in the caches from layer
        to layer, where one pass streams every layer's through memory (docs/codecs/encodec.md,
        speed). The latents are the one pass's bit for bit at all but a few lengths, within
        1e-7 there (docs/codecs/encodec.md), so the codes are the same but at a near tie."""
        seconds = self.encode_piece_seconds
        hop = self.samples_per_frame
        piece = 0 if seconds is None else round(seconds * self.sample_rate / hop) * hop
        if self.device.type != "cpu" or not piece or audio.shape[-1] < 2 * piece:
            return self.model.encode(audio)
        if self.config.causal:
            from .stream import latents_in_pieces

            latents = latents_in_pieces(self.model, audio, piece)
        else:
            from ...nn import seanet

            latents = seanet.latents_in_windows(self.model.encoder, audio.to(self.model.dtype),
                                                piece)
        return self.model.quantizer.encode(latents.float(), self.model.encode_levels)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.segmented:  # codes without scales: each segment as the package decodes a
            return self._decode_segments(tokens, lengths, None)  # segment without one
        return self._decode_by_length(tokens, lengths, self._decode_mono)

    def _decode_mono(self, tokens: torch.Tensor) -> torch.Tensor:
        """model.decode(tokens); on the CPU, codes of 2 pieces or more through the stateful
        stream, DECODE_PIECE_SECONDS of codes a push: a piece's activations stay in the caches
        from layer to layer, where one pass streams every layer's through memory
        (docs/codecs/encodec.md, speed); the audio within 1e-7 of one pass's."""
        piece = round(self.DECODE_PIECE_SECONDS * self.sample_rate / self.samples_per_frame)
        if self.device.type != "cpu" or tokens.shape[-1] < 2 * piece:
            return self.model.decode(tokens)
        stream = self.step_stream("decode")
        audio = [stream.push(tokens[..., at : at + piece])
                 for at in range(0, tokens.shape[-1], piece)]
        return torch.cat([*audio, stream.finish()], -1)

    def _decode_scaled(self, tokens: torch.Tensor, lengths: torch.Tensor, scales: torch.Tensor
                       ) -> torch.Tensor:
        if not self.segmented:
            return super()._decode_scaled(tokens, lengths, scales)
        return self._decode_segments(tokens, lengths, scales)

    def _decode_segments(self, tokens: torch.Tensor, lengths: torch.Tensor,
                         scales: torch.Tensor | None) -> torch.Tensor:
        """Items of one length as a batch: their segments decoded, scaled, overlap-added."""
        cfg = self.config
        out = torch.zeros(tokens.shape[0], cfg.channels,
                          segments.decoded_samples(cfg, tokens.shape[-1]), device=tokens.device)
        for n, group in by_length(lengths.tolist()):
            if n == 0:
                continue
            factors = None if scales is None else scales[group].to(tokens.device)
            audio = segments.decode(self.model, tokens[group][..., :n], factors)
            out[group, :, : audio.shape[-1]] = audio.to(out.dtype)
        return out

    def audio_lengths(self, lengths: torch.Tensor, num_samples: torch.Tensor | None = None
                      ) -> torch.Tensor:
        if not self.segmented:
            return super().audio_lengths(lengths, num_samples)
        out = torch.tensor([segments.decoded_samples(self.config, n) if n else 0
                            for n in lengths.tolist()])
        return out if num_samples is None else torch.minimum(num_samples.cpu(), out)


def stream_spec(cfg: EncodecConfig) -> StreamSpec:
    """How a variant streams: the 48 kHz model segment by segment both ways; a mono model with
    weight norm decodes as steps, and encodes as steps where it is causal (24 kHz)."""
    if cfg.segment is not None:
        return StreamSpec(decode=SEGMENTS, encode=SEGMENTS)
    return StreamSpec(decode=STEPS if cfg.norm == "weight_norm" else None,
                      encode=STEPS if cfg.causal and cfg.norm == "weight_norm" else None)
