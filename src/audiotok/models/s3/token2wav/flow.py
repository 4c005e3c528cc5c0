"""The flow: S3 tokens and a voice -> 50 Hz mel, by conditional flow matching.

Tokens (the voice's prompt tokens, then the tokens to speak) are embedded, encoded and
upsampled to the mel rate (encoder.py) and projected to 80 channels: mu. The mel is the
solution at t = 1 of dx/dt = v(x, mu, speaker, cond, t) from noise at t = 0, by `steps` Euler
steps on a cosine schedule, v under classifier-free guidance: (1 + r) v(cond) - r v(no mu,
no speaker, no cond). cond holds the voice's prompt mel in its first frames; the prompt's frames
are cut from the result. Names are the reference's (`flow.*`: CosyVoice 2's flow.pt)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ....nn.linear import Linear
from .config import N_MELS, SPEAKER_DIM, TOKEN_MEL_RATIO, VOCAB, FlowConfig
from .encoder import UpsampleConformerEncoder
from .estimator import Estimator


def cosine_schedule(steps: int, device=None) -> torch.Tensor:
    """[steps + 1] times 1 - cos(pi/2 s), s = 0, 1/steps, ..., 1 (float32)."""
    s = torch.linspace(0, 1, steps + 1, device=device, dtype=torch.float32)
    return 1 - torch.cos(s * 0.5 * math.pi)


class Sampler(nn.Module):
    """The Euler sampler around the estimator (`decoder.estimator`)."""

    def __init__(self, cfg: FlowConfig):
        super().__init__()
        self.estimator = Estimator(cfg)
        self.cfg_rate = cfg.cfg_rate

    def forward(self, noise: torch.Tensor, mu: torch.Tensor, mask: torch.Tensor,
                spks: torch.Tensor, cond: torch.Tensor, steps: int, chunk: int = 0
                ) -> torch.Tensor:
        """noise, mu, cond [B, 80, T]; mask [B, 1, T]; spks [B, 80] -> mel [B, 80, T]. The
        guided pair runs as rows of one estimator call: [conditioned; unconditioned]. chunk:
        the estimator's attention chunks (0: none)."""
        b = mu.shape[0]
        dtype = self.estimator.dtype  # (in reduced precision the estimator's; the state,
        zero = torch.zeros_like  # the guidance and the steps stay in float32)
        mu2, spks2, cond2 = (torch.cat([y, zero(y)]).to(dtype) for y in (mu, spks, cond))
        mask2 = torch.cat([mask, mask]).to(dtype)
        times = cosine_schedule(steps, mu.device)
        x = noise.float()
        for t, r in zip(times[:-1], times[1:], strict=True):
            v = self.estimator(torch.cat([x, x]).to(dtype), mask2, mu2, t.expand(2 * b),
                               spks2, cond2, chunk).float()
            v_cond, v_free = v[:b], v[b:]
            v = (1.0 + self.cfg_rate) * v_cond - self.cfg_rate * v_free
            x = x + (r - t) * v
        return x


class Flow(nn.Module):
    def __init__(self, cfg: FlowConfig):
        super().__init__()
        self.config = cfg
        self.input_embedding = nn.Embedding(VOCAB, cfg.width)
        self.spk_embed_affine_layer = Linear(SPEAKER_DIM, N_MELS)
        self.encoder = UpsampleConformerEncoder(cfg)
        self.encoder_proj = Linear(cfg.width, N_MELS)
        self.decoder = Sampler(cfg)

    def forward(self, tokens: torch.Tensor, prompt_tokens: torch.Tensor,
                prompt_mel: torch.Tensor, embedding: torch.Tensor, noise: torch.Tensor,
                steps: int | None = None, streaming: bool = False,
                context: torch.Tensor | None = None) -> torch.Tensor:
        """Items of one shape: tokens [B, T] (0..6560), prompt_tokens [B, P], prompt_mel
        [B, F, 80] (F = 2P for a voice made here), embedding [B, 192] (the x-vector, not
        normalised), noise [B, 80, 2 (P + T)] -> mel [B, 80, 2 (P + T) - F]. streaming:
        CosyVoice 2's chunk-aware mode (attention in chunks of `config.chunk` tokens and those
        before; what a stream computes); context: the `lookahead` tokens [B, 3] that follow
        (a stream's, not yet spoken; zeros stand for them otherwise)."""
        dtype = self.encoder_proj.weight.dtype
        spks = self.spk_embed_affine_layer(F.normalize(embedding.float(), dim=1).to(dtype)).float()
        tokens = torch.cat([prompt_tokens, tokens], 1)
        lengths = torch.full((tokens.shape[0],), tokens.shape[1], device=tokens.device)
        chunk = self.config.chunk if streaming else 0
        h = self.encoder(self.input_embedding(tokens), lengths, chunk,
                         None if context is None else self.input_embedding(context))
        mu = self.encoder_proj(h).transpose(1, 2).float()
        frames = mu.shape[-1]
        prompt = prompt_mel.shape[1]
        cond = torch.zeros_like(mu)
        cond[:, :, :prompt] = prompt_mel.transpose(1, 2)
        mask = torch.ones(mu.shape[0], 1, frames, dtype=mu.dtype, device=mu.device)
        mel = self.decoder(noise[..., :frames], mu, mask, spks, cond,
                           steps or self.config.steps, TOKEN_MEL_RATIO * chunk)
        return mel[:, :, prompt:]

    def frames(self, tokens: int, prompt_tokens: int, prompt_frames: int) -> int:
        """Mel frames decoded for `tokens` tokens after a prompt."""
        return TOKEN_MEL_RATIO * (prompt_tokens + tokens) - prompt_frames
