"""S3Codec: the S3 tokenizer behind the common Codec API, and token to audio where the
weights carry a decoder (token2wav/)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, by_length
from ...errors import AudiotokError
from ...streaming.spec import CHUNKS, StreamSpec
from . import FAMILY
from .config import HOP, SAMPLE_RATE, S3Config
from .mel import N_FFT, log_mel
from .model import S3Model
from .token2wav.config import MEL_HOP, TOKEN_MEL_RATIO
from .token2wav.config import SAMPLE_RATE as T2W_RATE
from .weights import checkpoint_file, load_checkpoint
from .windows import MERGES, feature_windows, merged

PROMPT_SECONDS = 10.0  # of an input, the voice its reconstruction speaks in


class S3Codec(Codec):
    """16 kHz speech -> one codebook of S3 tokens: 50 Hz (v1) or 25 Hz, 4096 (v1) or 6561 codes.

    Each item's log-mel is its own (the front end normalises by the utterance's maximum); an
    item of N samples gives ceil((N // 160) / 2) tokens at 50 Hz, ceil((N // 160) / 4) at
    25 Hz; inputs of 200 samples or fewer are refused. Over 30 s the encoder runs in 30 s
    windows every 26 s, merged as `merge` says (windows.py; the plan: `self.feature_windows`).
    Items of one length run as a batch; each other length on its own, so an item's codes never
    depend on its neighbours.

    Weights with a token-to-audio decoder (v2: CosyVoice 2's flow.pt and hift.pt, Chatterbox's
    s3gen.safetensors) also decode: decode(codes, voice=...) gives 24 kHz audio, 960 samples a
    token, spoken in a voice (make_voice); encode still takes 16 kHz (input_rate). Without
    one, decode() raises."""

    family = FAMILY
    frame_rule = f"hop:{HOP}"  # (num_frames counts feature_windows' merge beyond 30 s)
    min_samples = N_FFT // 2 + 1  # (the STFT's reflect padding needs more than 200)
    # no encode stream: the encoder attends to its whole window (up to 30 s); token-to-audio
    # streams in CosyVoice 2's chunks (token2wav/stream.py)
    streaming = StreamSpec(decode=CHUNKS)
    decode_refusal = ("these S3 weights have no token-to-audio decoder: S3 tokens become audio "
                      "through a flow-matching model conditioned on a voice; load v2 weights "
                      "that have one (CosyVoice2-0.5B's folder with flow.pt and hift.pt, "
                      "Chatterbox's s3gen.safetensors)")

    def __init__(self, model: S3Model, *, merge: str = "s3tokenizer", **kw):
        super().__init__(model, model.config, **kw)
        if merge not in MERGES:
            raise AudiotokError(f"merge must be one of {', '.join(MERGES)}, got {merge!r}")
        cfg: S3Config = model.config
        self.merge = merge
        self.feature_windows = feature_windows(cfg, merge)
        self.sample_rate = SAMPLE_RATE
        self.samples_per_frame = cfg.samples_per_token
        self.num_codebooks = 1
        self.codebook_sizes = (cfg.codebook_size,)
        self.decoder = model.token2wav
        if self.decoder is not None:
            self.decode_refusal = None
            self.decode_conditioning = ("voice",)
            self.sample_rate = T2W_RATE
            self.input_rate = SAMPLE_RATE
            self.samples_per_frame = TOKEN_MEL_RATIO * MEL_HOP

    @classmethod
    def from_checkpoint(cls, path: Path, config: S3Config | None = None,
                        variant: str | None = None, **kw) -> S3Codec:
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config, variant)
        model = build_model(S3Model, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    @property
    def title(self) -> str:
        decoder = " with token-to-audio" if self.decoder is not None else ""
        return f"{FAMILY.title} ({self.config.variant}){decoder}"

    def info(self) -> dict:
        out = {**super().info(), "variant": self.config.variant, "merge": self.merge}
        if self.decoder is not None:
            t2w = self.config.token2wav
            out["token2wav"] = {"noise": t2w.noise, "excitation": t2w.hift.sine,
                                "steps": t2w.flow.steps,
                                "makes_voices": self.decoder.speaker_encoder is not None}
        return out

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Tokens [1, T_i] per item: each item's log-mel, its windows, the windows of one
        length as a batch, then each item's windows merged."""
        mels = [log_mel(it.samples.reshape(-1).to(self.device)) for it in items]
        plan = self.feature_windows
        jobs = [(i, s, e) for i, m in enumerate(mels) for s, e in plan.spans(m.shape[-1])]
        codes = self.encode_windows([mels[i][:, s:e] for i, s, e in jobs])
        out = []
        for i, m in enumerate(mels):
            mine = [c for (j, _, _), c in zip(jobs, codes, strict=True) if j == i]
            out.append(merged(mine, m.shape[-1], plan)[None].cpu())
        return out

    def encode_windows(self, mels: list[torch.Tensor]) -> list[torch.Tensor]:
        """Codes [T_j] of each log-mel window [128, F_j] (F_j <= 3000); windows of one length
        run as one batch."""
        out: list[torch.Tensor | None] = [None] * len(mels)
        with torch.inference_mode():
            for frames, group in by_length([m.shape[-1] for m in mels]):
                batch = torch.stack([mels[j] for j in group]).to(self.dtype)
                lengths = torch.full((len(group),), frames, device=batch.device)
                codes, n = self.model(batch, lengths)
                for k, j in enumerate(group):
                    out[j] = codes[k, : int(n[k])]
        return out

    # -- token to audio ------------------------------------------------------------------------
    def decode(self, codes, *, voice=None, seed=0, steps: int | None = None,
               chunked: bool = False, clamp: bool = False, frame_offsets=None) -> torch.Tensor:
        """Audio float32 [B, 1, N] at 24 kHz of Codes or tokens [B, 1, T] / [1, T], spoken in
        `voice` (a Voice or a .voice file): 960 samples a token (for a voice made here), each
        item trimmed to its length and zero beyond. `seed` (an int, or one per item): the noise
        each item draws (see token2wav/model.py); `steps`: Euler steps (default 10). chunked:
        CosyVoice 2's streaming mode run whole, what stream_decoder(exact=True) gives (the
        flow's attention within 25-token chunks and those before; weights with fixed noise).
        frame_offsets: taken for the contract's sake, unused (the noise is the item's own)."""
        voice = self._voice(voice, steps)
        if chunked:
            self._check_exact()
        tokens, lengths, num_samples = self._check_codes(codes, clamp)
        b = tokens.shape[0]
        seeds = [seed] * b if isinstance(seed, int) else [int(s) for s in seed]
        if len(seeds) != b:
            raise AudiotokError(f"seed: one int, or one per item ({b}), got {len(seeds)}")
        extra = 2 * voice.tokens.numel() - voice.mel.shape[0]  # frames a short prompt mel adds
        out = (lengths * TOKEN_MEL_RATIO + extra) * MEL_HOP
        if num_samples is not None:
            out = torch.minimum(out, num_samples)
        audio = torch.zeros(b, 1, int(out.max()))
        with torch.inference_mode():
            for n, group in by_length(lengths.tolist()):
                got = self.decoder(tokens[group, 0, :n].to(self.device), voice,
                                   [seeds[i] for i in group], steps, chunked).float().cpu()
                audio[group, :, : got.shape[-1]] = got
        for i, n in enumerate(out.tolist()):
            audio[i, :, n:] = 0
        return audio

    def _voice(self, voice, steps):
        """decode()'s voice, loaded, and its steps checked."""
        from .token2wav.voice import Voice

        if self.decoder is None:
            raise AudiotokError(self.decode_refusal)
        if voice is None:
            raise AudiotokError("decoding S3 tokens needs a voice: make one from prompt speech "
                                "with codec.make_voice(audio) (or `audiotok voice PROMPT -o "
                                "NAME.voice`) and pass voice=")
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise AudiotokError(f"steps must be a positive integer, got {steps!r}")
        return voice if isinstance(voice, Voice) else self.load_voice(voice)

    def stream_refusal(self, direction: str) -> str | None:
        if direction != "decode":
            return None
        if self.decode_refusal is not None:
            return self.decode_refusal
        if self.decoder.config.noise != "fixed":
            return ("these weights draw their flow noise per call (Chatterbox's S3Gen), which a "
                    "chunk stream cannot hold fixed; decode whole token sequences")
        return None

    def segment_stream(self, direction: str, *, voice=None, seed=0, steps: int | None = None,
                       exact: bool = False):
        """A token-to-audio stream in CosyVoice 2's chunks (token2wav/stream.py): audio for
        each 25 tokens once the 3 after them are in, spoken in `voice`; seed and steps as
        decode() takes them. exact: decode(..., chunked=True)'s audio instead of the
        reference stream's."""
        from .token2wav.stream import ChunkStream

        if not isinstance(exact, bool):
            raise AudiotokError(f"exact must be True or False, got {exact!r}")
        if exact:
            self._check_exact()
        return ChunkStream(self.decoder, self._voice(voice, steps), seed, steps, self.device,
                           exact)

    def _check_exact(self) -> None:
        """Refuse the exact stream and the chunked decode where they do not apply."""
        if why := self.stream_refusal("decode"):
            raise AudiotokError(why)
        if self.decoder.hift.config.sine != "sinegen2":
            raise AudiotokError("the exact stream and the chunked decode carry CosyVoice 2's "
                                "excitation (SineGen2); these weights' vocoder is Chatterbox's")

    def load_voice(self, path):
        from .token2wav.voice import Voice

        if self.decoder is None:
            raise AudiotokError(self.decode_refusal)
        return Voice.load(path)

    def make_voice(self, audio, sample_rate: int | None = None,
                   max_seconds: float | None = None):
        """A Voice from prompt speech (a path, bytes or an array at `sample_rate`): its S3 tokens
        and speaker embedding at 16 kHz, its mel at 24 kHz (resampled from the input's rate);
        tokens and mel cut to the shorter, as CosyVoice 2 cuts its prompt. max_seconds: only
        the prompt's first seconds."""
        from ...audio import to_items

        if self.decoder is None:
            raise AudiotokError(self.decode_refusal)
        at16 = to_items(audio, sample_rate, SAMPLE_RATE)
        at24 = to_items(audio, sample_rate, T2W_RATE)
        if len(at16) != 1:
            raise AudiotokError(f"a voice is made from one prompt, got {len(at16)} items")
        speech = at16[0].samples.reshape(-1)
        speech24 = at24[0].samples.reshape(-1)
        if max_seconds is not None:
            speech = speech[: int(max_seconds * SAMPLE_RATE)]
            speech24 = speech24[: int(max_seconds * T2W_RATE)]
        tokens = self.encode(speech, SAMPLE_RATE).tokens[0, 0]  # (one item: no padding)
        return self.decoder.make_voice(tokens, speech.to(self.device), speech24.to(self.device))

    def own_conditioning(self, audio, sample_rate: int | None = None) -> dict:
        """A reconstruction's voice: the input's first 10 s (Chatterbox's DEC_COND_LEN), so
        that a long input is not encoded twice whole nor its flow run over twice its length."""
        return {"voice": self.make_voice(audio, sample_rate, max_seconds=PROMPT_SECONDS)}
