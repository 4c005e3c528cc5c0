"""The HiFT vocoder over a mel that grows, each sample given once it is final and equal to the
vocoder run once on the whole mel (SineGen2's excitation, CosyVoice 2's weights).

The excitation's phase accumulates over the whole signal, so it is carried: the running sum of
each harmonic's per-frame phase step (in float64, as torch's CPU cumsum accumulates it), and
the audio-rate phase interpolated between frames with weights that depend only on a sample's
place in its frame (torch's linear upsampling computes them from the sample's index in float32,
so its phase drifts with the index: docs/codecs/s3.md). The network
is not causal but reaches `REACH` mel frames each side, so it runs on windows of the mel with
that much context. The noise is drawn in blocks of `NOISE_FRAMES` frames from each row's
generator, so a stream and a whole run draw the same; the uniform phase draws of SineGen2 do
not change its output and are only consumed.

`decode(..., chunked=True)` runs this over the whole mel at once; an exact stream
(stream.ChunkStream with exact=True) runs it chunk by chunk: the same audio."""

from __future__ import annotations

import math

import torch

from .config import SAMPLE_RATE
from .hift import HiFT, HiftNoise

REACH = 12  # mel frames the vocoder's network reaches each side (11 measured, one more kept)
F0_REACH = 5  # the F0 predictor's five kernel-3 convolutions
F0_BLOCK = 10  # frames whose F0 is computed together
NOISE_FRAMES = 50  # frames of noise drawn at a time (a 25-token chunk's)


class ExactVocoder:
    """push(mel [B, 80, n], last) -> audio [B, 1, 480 m] of the frames now final (all of them
    with `last`), for B rows each drawing from its own generator."""

    def __init__(self, hift: HiFT, generators: list[torch.Generator]):
        cfg = hift.config
        if cfg.sine != "sinegen2":
            raise ValueError("the exact vocoder stream is SineGen2's (CosyVoice 2's)")
        self.hift, self.cfg, self.generators = hift, cfg, generators
        b, h = len(generators), cfg.harmonics + 1
        device = next(hift.parameters()).device
        self.mel = torch.zeros(b, 80, 0, device=device)  # frames from self.start on
        self.f0 = torch.zeros(b, 0, device=device)  # final F0, frames from self.start on
        self.cum = torch.zeros(b, 0, h, dtype=torch.float64, device=device)  # phase sums
        self.noise = torch.zeros(b, 0, h, device=device)  # samples from 480 self.start on
        self.start = 0  # global index of the first frame kept
        self.known = 0  # mel frames in
        self.done = 0  # frames whose audio is out
        self.drawn = 0  # frames of noise drawn
        self.harmonic = torch.arange(1, h + 1, dtype=torch.float32, device=device)
        # the audio-rate phase: sample r of frame i lies between frames i - 1 and i (r < 240)
        # or i and i + 1, at these weights of the second
        u = cfg.upsample
        r = torch.arange(u, dtype=torch.float64)
        self.weight = torch.where(r < u // 2, (r + u / 2 + 0.5) / u, (r - u / 2 + 0.5) / u
                                  ).float().to(device)

    def push(self, mel: torch.Tensor, last: bool) -> torch.Tensor:
        self.mel = torch.cat([self.mel, mel.to(self.mel.dtype)], -1)
        self.known += mel.shape[-1]
        self._final_f0(last)
        final = self.start + self.f0.shape[1]  # frames whose F0 is final
        end = self.known if last else max(self.done, final - 1 - REACH)
        if end <= self.done:
            return torch.zeros(len(self.generators), 1, 0, device=self.mel.device)
        lo = max(self.start, self.done - REACH)
        hi = self.known if last else end + REACH
        source = self._excitation(lo, hi, last)
        audio = self.hift.generate(self._kept(self.mel, lo, hi), source)
        u = self.cfg.upsample
        out = audio[..., u * (self.done - lo): u * (end - lo)]
        self.done = end
        self._trim()
        return out

    def _kept(self, x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        return x[..., lo - self.start: hi - self.start]

    def _final_f0(self, last: bool) -> None:
        """F0 and phase sums of the blocks of F0_BLOCK frames now final (a frame's F0 sees
        F0_REACH frames each side), each block from the same mel window however the mel came
        in pieces, so that its rounding is the same in a stream and in a whole run."""
        while True:
            have = self.start + self.f0.shape[1]  # (a multiple of F0_BLOCK, or the end)
            upto = min(have + F0_BLOCK, self.known)
            ready = last or (upto - have == F0_BLOCK and upto + F0_REACH <= self.known)
            if upto <= have or not ready:
                return
            lo = max(0, have - F0_REACH)
            mel = self._kept(self.mel, lo, min(self.known, upto + F0_REACH))
            f0 = self.hift.f0_predictor(mel)[:, have - lo: upto - lo]
            rad = (f0[..., None] * self.harmonic / SAMPLE_RATE) % 1  # [B, n, 9]
            cum = torch.cumsum(rad.double(), 1)
            if self.cum.shape[1]:  # (the sum so far: the last kept one; trims keep it)
                cum = cum + self.cum[:, -1:]
            self.f0 = torch.cat([self.f0, f0], 1)
            self.cum = torch.cat([self.cum, cum], 1)

    def _excitation(self, lo: int, hi: int, last: bool) -> torch.Tensor:
        """The source [B, 1, 480 (hi - lo)] of frames lo..hi."""
        cfg, u = self.cfg, self.cfg.upsample
        final = self.start + self.f0.shape[1]
        # the phase of frames lo - 1 .. hi (clamped to the signal), at the audio rate
        index = torch.arange(lo - 1, hi + 1, device=self.mel.device).clamp(0, final - 1)
        phase = (self.cum[:, index - self.start].float() * 2 * math.pi) * u  # [B, n + 2, 9]
        w = self.weight[None, None, :, None]  # [1, 1, 480, 1]
        before, here, after = phase[:, :-2, None], phase[:, 1:-1, None], phase[:, 2:, None]
        left = before + (here - before) * w  # [B, n, 480, 9]
        right = here + (after - here) * w
        first = (torch.arange(u, device=self.mel.device) < u // 2)[None, None, :, None]
        phase = torch.where(first, left, right).flatten(1, 2)  # [B, 480 n, 9]
        f0 = self._kept(self.f0, lo, hi).repeat_interleave(u, 1)[..., None]  # [B, 480 n, 1]
        return self.hift.m_source.mix(torch.sin(phase) * cfg.sine_amp, f0, self._noise(lo, hi))

    def _noise(self, lo: int, hi: int) -> torch.Tensor:
        """The noise [B, 480 (hi - lo), 9] of frames lo..hi, drawn in blocks as needed."""
        while self.drawn < hi:
            draws = [HiftNoise.draw(self.cfg, 1, NOISE_FRAMES, g) for g in self.generators]
            block = torch.cat([d.noise for d in draws]).to(self.noise.device)
            self.noise = torch.cat([self.noise, block], 1)
            self.drawn += NOISE_FRAMES
        u = self.cfg.upsample
        return self.noise[:, u * (lo - self.start): u * (hi - self.start)]

    def _trim(self) -> None:
        """Drop what no later window reads (frames before done - REACH - 1)."""
        keep = max(self.start, self.done - REACH - 1)
        cut, self.start = keep - self.start, keep
        u = self.cfg.upsample
        self.mel, self.f0, self.cum = self.mel[..., cut:], self.f0[:, cut:], self.cum[:, cut:]
        self.noise = self.noise[:, u * cut:]
