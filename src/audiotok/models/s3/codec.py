"""S3Codec: the S3 tokenizer behind the common Codec API (encode only)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, by_length
from ...errors import AudiotokError
from ...streaming.spec import StreamSpec
from . import FAMILY
from .config import HOP, SAMPLE_RATE, S3Config
from .mel import N_FFT, log_mel
from .model import S3Model
from .weights import checkpoint_file, load_checkpoint
from .windows import MERGES, feature_windows, merged


class S3Codec(Codec):
    """16 kHz speech -> one codebook of S3 tokens: 50 Hz (v1) or 25 Hz, 4096 (v1) or 6561 codes.

    Each item's log-mel is its own (the front end normalises by the utterance's maximum); an
    item of N samples gives ceil((N // 160) / 2) tokens at 50 Hz, ceil((N // 160) / 4) at
    25 Hz; inputs of 200 samples or fewer are refused. Over 30 s the encoder runs in 30 s
    windows every 26 s, merged as `merge` says (windows.py). Items of one length run as a
    batch; each other length on its own, so an item's codes never depend on its neighbours.
    decode() raises: S3 tokens become audio through a token-to-audio model with a voice."""

    family = FAMILY
    frame_rule = f"hop:{HOP}"  # inputs up to 30 s; num_frames counts the windows' merge too
    # no streams: the encoder attends to its whole window (up to 30 s); nothing decodes
    streaming = StreamSpec(decode=None)
    decode_refusal = ("S3 tokens do not decode with the tokenizer: they become audio through a "
                      "flow-matching token-to-audio model conditioned on a voice (CosyVoice 2's "
                      "flow and HiFT vocoder, Chatterbox's S3Gen), which audiotok does not "
                      "provide yet; the s3 family encodes only")

    def __init__(self, model: S3Model, *, merge: str = "s3tokenizer", **kw):
        super().__init__(model, model.config, **kw)
        if merge not in MERGES:
            raise AudiotokError(f"merge must be one of {', '.join(MERGES)}, got {merge!r}")
        cfg: S3Config = model.config
        self.merge = merge
        self.windows = feature_windows(cfg, merge)
        self.sample_rate = SAMPLE_RATE
        self.samples_per_frame = cfg.samples_per_token
        self.num_codebooks = 1
        self.codebook_sizes = (cfg.codebook_size,)

    @classmethod
    def from_checkpoint(cls, path: Path, config: S3Config | None = None,
                        variant: str | None = None, **kw) -> S3Codec:
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config, variant)
        model = build_model(S3Model, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    @property
    def title(self) -> str:
        return f"{FAMILY.title} ({self.config.variant})"

    def info(self) -> dict:
        return {**super().info(), "variant": self.config.variant, "merge": self.merge}

    def num_frames(self, num_samples: int) -> int:
        return self.windows.tokens(num_samples // HOP)

    def check_whole_frame(self, num_samples: int, hint: str = "") -> None:
        if num_samples <= N_FFT // 2:  # (the STFT's reflect padding needs more)
            raise AudiotokError(f"{num_samples} samples is too short for the S3 tokenizer: it "
                                f"needs more than {N_FFT // 2} samples at {SAMPLE_RATE} Hz")

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Tokens [1, T_i] per item: each item's log-mel, its windows, the windows of one
        length as a batch, then each item's windows merged."""
        for it in items:
            self.check_whole_frame(it.samples.numel())
        mels = [log_mel(it.samples.reshape(-1).to(self.device)) for it in items]
        jobs = [(i, s, e) for i, m in enumerate(mels) for s, e in self.windows.spans(m.shape[-1])]
        codes = self.encode_windows([mels[i][:, s:e] for i, s, e in jobs])
        out = []
        for i, m in enumerate(mels):
            mine = [c for (j, _, _), c in zip(jobs, codes, strict=True) if j == i]
            out.append(merged(mine, m.shape[-1], self.windows)[None].cpu())
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
