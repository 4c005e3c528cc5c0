"""Token2Wav: S3 v2 tokens and a voice -> 24 kHz audio (CosyVoice 2's token-to-audio, which
Chatterbox's S3Gen shares): the flow (tokens -> 50 Hz mel), the HiFT vocoder (mel -> audio)
and the speaker encoder that makes voices.

Noise is part of the result. The flow starts from CosyVoice 2's fixed buffer or from a draw of
the call's seed (Token2WavConfig.noise); the vocoder's excitation draws from the seed after
it, in the reference's order, so a call with seed s gives what the reference gives after
torch.manual_seed(s). Each item draws from its own generator: its audio does not depend on
the batch it shares a call with."""

from __future__ import annotations

import math

import torch
from torch import nn

from ....errors import AudiotokError
from .campplus import CAMPPlus, OnnxCAMPPlus
from .config import N_MELS, Token2WavConfig
from .flow import Flow
from .hift import HiFT, HiftNoise
from .vocoder_stream import ExactVocoder
from .voice import Voice

FIXED_FRAMES = 15000  # CosyVoice 2's noise buffer: 300 s of mel, prompt included


def fade_in(samples: int) -> torch.Tensor:
    """[samples]: zeros for the first half, then a raised cosine from 0 to 1 (Chatterbox's)."""
    half = samples // 2
    curve = torch.zeros(samples)
    curve[half:] = (torch.cos(torch.linspace(math.pi, 0, half)) + 1) / 2
    return curve


class Token2Wav(nn.Module):
    def __init__(self, cfg: Token2WavConfig):
        super().__init__()
        self.config = cfg
        self.flow = Flow(cfg.flow)
        self.hift = HiFT(cfg.hift)
        self.speaker_encoder = CAMPPlus() if cfg.speaker_encoder else \
            OnnxCAMPPlus(cfg.speaker_onnx) if cfg.speaker_onnx else None
        self._fixed: torch.Tensor | None = None

    def noise(self, frames: int, generator: torch.Generator) -> torch.Tensor:
        """The flow's starting point [1, 80, frames] for one item."""
        if self.config.noise == "drawn":
            return torch.randn(1, N_MELS, frames, generator=generator)
        if frames > FIXED_FRAMES:
            raise AudiotokError(f"{frames} mel frames (prompt included) is more than CosyVoice 2's "
                                f"noise buffer holds ({FIXED_FRAMES}, 300 s): decode shorter "
                                "pieces")
        if self._fixed is None:
            self._fixed = torch.randn(1, N_MELS, FIXED_FRAMES,
                                      generator=torch.Generator().manual_seed(0))
        return self._fixed[..., :frames]

    def forward(self, tokens: torch.Tensor, voice: Voice, seeds: list[int],
                steps: int | None = None, chunked: bool = False) -> torch.Tensor:
        """tokens [B, T] (one length, 0..6560) spoken in `voice`, item b drawing its noise from
        seeds[b] -> audio [B, 1, 480 M], M = 2 (P + T) - F mel frames (2T for a voice made
        here). chunked: CosyVoice 2's streaming mode, whole (the flow's chunk masks, the
        vocoder of vocoder_stream.py): what an exact stream gives."""
        b, device = tokens.shape[0], tokens.device
        generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        prompt = voice.tokens.numel()
        frames = 2 * (prompt + tokens.shape[1])
        noise = torch.cat([self.noise(frames, g) for g in generators]).to(device)

        def rows(x):
            return x.to(device)[None].expand(b, *x.shape)

        mel = self.flow(tokens, rows(voice.tokens), rows(voice.mel.float()),
                        rows(voice.embedding.float()), noise, steps, streaming=chunked)
        if chunked:
            return ExactVocoder(self.hift, generators).push(mel, True)
        draws = [HiftNoise.draw(self.hift.config, 1, mel.shape[-1], g) for g in generators]
        excitation = HiftNoise(torch.cat([d.phase for d in draws]).to(device),
                               torch.cat([d.noise for d in draws]).to(device))
        audio = self.hift(mel, excitation)
        if self.config.fade_in:
            n = min(self.config.fade_in, audio.shape[-1])
            audio[..., :n] *= fade_in(self.config.fade_in)[:n].to(device)
        return audio

    @torch.inference_mode()
    def make_voice(self, tokens: torch.Tensor, audio_16k: torch.Tensor, audio_24k: torch.Tensor
                   ) -> Voice:
        """A voice from a prompt's S3 tokens [P] (of audio_16k) and its speech at 16 kHz [N]
        (speaker embedding) and at 24 kHz [N'] (mel); tokens and mel cut to the shorter."""
        from .voice import prompt_mel

        if self.speaker_encoder is None:
            raise AudiotokError("these weights have no speaker encoder (CAMPPlus; CosyVoice 2's "
                                "is campplus.onnx beside flow.pt), so they make no voices: load "
                                "a voice file made with another S3 decoder")
        embedding = self.speaker_encoder.embed(audio_16k.float())
        return Voice.aligned(tokens.cpu(), prompt_mel(audio_24k).cpu(), embedding.cpu())
