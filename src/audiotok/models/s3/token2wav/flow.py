"""The flow: S3 tokens and a voice -> 50 Hz mel, by conditional flow matching.

Tokens (the voice's prompt tokens, then the tokens to speak) are embedded, encoded and
upsampled to the mel rate (encoder.py) and projected to 80 channels: mu. The mel is the
solution at t = 1 of dx/dt = v(x, mu, speaker, cond, t) from noise at t = 0, by `steps` Euler
steps on a cosine schedule, v under classifier-free guidance: (1 + r) v(cond) - r v(no mu,
no speaker, no cond). cond holds the voice's prompt mel in its first frames; the prompt's frames
are cut from the result. Names are the reference's (`flow.*`: CosyVoice 2's flow.pt)."""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass
class FlowRow:
    """One item of a Flow.rows call: tokens [T], its voice's prompt_tokens [P], prompt_mel
    [F, 80] and embedding [192], noise [80, >= 2 (P + T)], and (a stream's) the `lookahead`
    tokens that follow [3], or None."""

    tokens: torch.Tensor
    prompt_tokens: torch.Tensor
    prompt_mel: torch.Tensor
    embedding: torch.Tensor
    noise: torch.Tensor
    context: torch.Tensor | None = None


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
        rows = [FlowRow(tokens[b], prompt_tokens[b], prompt_mel[b], embedding[b], noise[b],
                        None if context is None else context[b])
                for b in range(tokens.shape[0])]
        return torch.stack(self.rows(rows, steps, streaming))

    def rows(self, rows: list[FlowRow], steps: int | None = None, streaming: bool = False
             ) -> list[torch.Tensor]:
        """Items of any lengths and voices as the rows of one call -> each item's mel
        [80, 2 (P + T) - F]. Each row is right-padded and masked (its padding reaches none of
        its frames: the convolutions look left, attention skips padded keys, and the
        pre-lookahead sees the row's own context after its end), so a row's mel is its mel
        alone. Every row has a context, or none does."""
        device = self.encoder_proj.weight.device
        seqs = [torch.cat([r.prompt_tokens, r.tokens]).to(device) for r in rows]
        lengths = torch.tensor([s.shape[0] for s in seqs], device=device)
        tokens = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long, device=device)
        for b, seq in enumerate(seqs):
            tokens[b, : seq.shape[0]] = seq
        context = None
        if rows[0].context is not None:
            context = torch.stack([r.context for r in rows]).to(device)
        embedding = torch.stack([r.embedding for r in rows]).float().to(device)
        chunk = self.config.chunk if streaming else 0
        mu, spks = self.encode(tokens, lengths, embedding, chunk, context)
        frames = TOKEN_MEL_RATIO * lengths
        cond, noise = torch.zeros_like(mu), torch.zeros_like(mu)
        for b, r in enumerate(rows):
            cond[b, :, : r.prompt_mel.shape[0]] = r.prompt_mel.transpose(0, 1)
            noise[b, :, : int(frames[b])] = r.noise[:, : int(frames[b])]
        mask = (torch.arange(mu.shape[-1], device=device) < frames[:, None])[:, None]
        mel = self.decoder(noise, mu, mask.to(mu.dtype), spks, cond,
                           steps or self.config.steps, TOKEN_MEL_RATIO * chunk)
        return [mel[b, :, r.prompt_mel.shape[0]: int(frames[b])] for b, r in enumerate(rows)]

    def encode(self, tokens: torch.Tensor, lengths: torch.Tensor, embedding: torch.Tensor,
               chunk: int = 0, context: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompt and tokens [B, L] (right-padded to `lengths` [B]) and x-vectors [B, 192] ->
        (mu [B, 80, 2L] float32, the speaker's 80 channels [B, 80] float32); chunk and
        context (tokens [B, 3]) as in rows()."""
        dtype = self.encoder_proj.weight.dtype
        spks = self.spk_embed_affine_layer(F.normalize(embedding.float(), dim=1).to(dtype))
        h = self.encoder(self.input_embedding(tokens), lengths, chunk,
                         None if context is None else self.input_embedding(context))
        return self.encoder_proj(h).transpose(1, 2).float(), spks.float()

    def frames(self, tokens: int, prompt_tokens: int, prompt_frames: int) -> int:
        """Mel frames decoded for `tokens` tokens after a prompt."""
        return TOKEN_MEL_RATIO * (prompt_tokens + tokens) - prompt_frames
