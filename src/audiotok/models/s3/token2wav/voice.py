"""Voices: what token-to-audio is conditioned on, made once from prompt speech and reused.

A voice holds the prompt's S3 tokens [P] (v2, 25 Hz), its 24 kHz log-mel [F, 80] (50 Hz; F = 2P
for a voice made here) and its speaker embedding [192] (CAMPPlus). Saved as a small
safetensors file (`.voice`), loaded by path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ....errors import AudiotokError
from ..mel import mel_filters
from .config import MEL_HOP, N_MELS, SAMPLE_RATE, SPEAKER_DIM, TOKEN_MEL_RATIO, VOCAB

FORMAT = "audiotok-voice"
N_FFT = 1920


def prompt_mel(audio: torch.Tensor) -> torch.Tensor:
    """[N // 480, 80] log-mel of 24 kHz speech [N] (Matcha-TTS's, which CosyVoice 2 and Chatterbox
    use): reflect padding of 720 each side, a 1920-point STFT every 480 samples (periodic Hann,
    no centring), magnitude sqrt(re^2 + im^2 + 1e-9), the Slaney filterbank to 8 kHz, natural
    log floored at 1e-5."""
    pad = (N_FFT - MEL_HOP) // 2
    x = F.pad(audio.float()[None, None], (pad, pad), mode="reflect")[0]
    window = torch.hann_window(N_FFT, device=audio.device)
    spec = torch.view_as_real(torch.stft(x, N_FFT, MEL_HOP, N_FFT, window=window, center=False,
                                         return_complex=True))
    magnitude = torch.sqrt(spec.pow(2).sum(-1) + 1e-9)
    mel = mel_filters(N_MELS, SAMPLE_RATE, N_FFT, 8000.0).to(audio.device) @ magnitude
    return torch.log(torch.clamp(mel, min=1e-5))[0].T


@dataclass(frozen=True)
class Voice:
    """A prompt's tokens [P] (int64), its mel [F, 80] and its speaker embedding [192]. F is 2P
    for a voice made here; up to 2P + 1 is taken (Chatterbox cuts the tokens of an odd-length
    prompt mel, not the mel: its audio is then 480 samples shorter)."""

    tokens: torch.Tensor
    mel: torch.Tensor
    embedding: torch.Tensor

    def __post_init__(self):
        t, m, e = self.tokens, self.mel, self.embedding
        if t.dim() != 1 or t.dtype != torch.int64 or (t.numel() and
                                                       (int(t.min()) < 0 or int(t.max()) >= VOCAB)):
            raise AudiotokError(f"a voice's tokens must be int64 [P] in 0..{VOCAB - 1}")
        if m.dim() != 2 or m.shape[1] != N_MELS or not m.dtype.is_floating_point:
            raise AudiotokError(f"a voice's mel must be float [F, {N_MELS}], got "
                                f"{list(m.shape)}")
        if m.shape[0] > TOKEN_MEL_RATIO * t.numel() + 1:
            raise AudiotokError(f"a voice's mel has {m.shape[0]} frames, more than 2 per token "
                                f"({t.numel()} tokens) and one")
        if e.shape != (SPEAKER_DIM,) or not e.dtype.is_floating_point:
            raise AudiotokError(f"a voice's embedding must be float [{SPEAKER_DIM}]")

    @classmethod
    def aligned(cls, tokens: torch.Tensor, mel: torch.Tensor, embedding: torch.Tensor) -> Voice:
        """A voice with tokens and mel cut to the shorter of them (2 mel frames a token), as
        CosyVoice 2's front end cuts its prompt."""
        n = min(tokens.numel(), mel.shape[0] // TOKEN_MEL_RATIO)
        return cls(tokens[:n].long(), mel[: TOKEN_MEL_RATIO * n].float(), embedding.float())

    @property
    def prompt_tokens(self) -> int:
        return self.tokens.numel()

    def save(self, path: str | os.PathLike) -> Path:
        """Write the voice to `path` (safetensors; made whole or not at all)."""
        from safetensors.torch import save_file

        from ....fileio import atomic_output

        path = Path(path)
        with atomic_output(path) as tmp:
            save_file({"tokens": self.tokens.contiguous(), "mel": self.mel.float().contiguous(),
                       "embedding": self.embedding.float().contiguous()}, str(tmp),
                      metadata={"format": FORMAT, "format_version": "1", "tokens": "s3 v2_25hz",
                                "mel_rate": "50", "sample_rate": str(SAMPLE_RATE)})
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Voice:
        from safetensors import SafetensorError, safe_open

        path = Path(path)
        if not path.is_file():
            raise AudiotokError(f"{path}: no such voice file")
        try:
            with safe_open(str(path), "pt") as f:
                meta = f.metadata() or {}
                if meta.get("format") != FORMAT:
                    raise AudiotokError(f"{path}: not an audiotok voice file")
                tensors = {k: f.get_tensor(k) for k in ("tokens", "mel", "embedding")}
        except (SafetensorError, OSError, KeyError) as e:
            raise AudiotokError(f"{path}: unreadable voice file ({e})") from None
        return cls(**tensors)
