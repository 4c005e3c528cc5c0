"""HiFT: 50 Hz mel -> 24 kHz audio (neural source filter + iSTFT-Net), CosyVoice 2's and
Chatterbox's vocoder.

1. F0 [B, M] from the mel (five convolutions with ELU, a linear layer, |.|).
2. The excitation at the audio rate: 9 harmonics of F0 (`sinegen2`: phase accumulated per
   frame and interpolated, CosyVoice 2; `sinegen`: phase accumulated per sample, Chatterbox),
   amplitude 0.1 where F0 > 10 Hz (voiced) plus Gaussian noise (std 0.003 voiced, 0.1/3
   unvoiced), mixed by Linear(9 -> 1) and tanh.
3. The generator: conv_pre, three upsampling stages (x8, x5, x3), each adding the
   excitation's STFT (16-point, hop 4) brought to its rate, averaged residual blocks, then
   log-magnitude and phase of a 16-point spectrum every 4 samples -> iSTFT -> clamp +-0.99.
   480 samples per mel frame.

Noise is an input (HiftNoise), drawn in the reference's order from a generator, so a seeded
call reproduces the reference's seeded call. Names are the reference's (`hift.pt`,
`mel2wav.*`), weight norm folded."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ....nn.activations import Snake1d
from ....nn.istft import irfft_polar, overlap_add
from ....nn.linear import Linear
from ....nn.tracing import exporting
from .config import N_MELS, SAMPLE_RATE, HiftConfig


@dataclass
class HiftNoise:
    """The excitation's random draws for a batch of B items of M mel frames: `phase`
    (sinegen: [B, 9, 1] uniform in [-pi, pi), the fundamental's set to 0; sinegen2 draws
    [B, 9] that do not change the output) and `noise` (standard normal, [B, 9, 480 M] for
    sinegen, [B, 480 M, 9] for sinegen2)."""

    phase: torch.Tensor
    noise: torch.Tensor

    @classmethod
    def draw(cls, cfg: HiftConfig, batch: int, frames: int,
             generator: torch.Generator | None = None, device=None) -> HiftNoise:
        """Draws as the reference's source draws them, in its order, and then the one more
        tensor it draws and does not use ([B, 480 M, 1]), so that the generator's next draws
        (a stream's next chunk) are the reference's too."""
        h, n = cfg.harmonics + 1, cfg.upsample * frames
        if cfg.sine == "sinegen":
            phase = torch.rand(batch, h, 1, generator=generator, device=device) * (2 * math.pi) \
                - math.pi
            phase[:, 0] = 0
            noise = torch.randn(batch, h, n, generator=generator, device=device)
        else:
            phase = torch.rand(batch, h, generator=generator, device=device)
            # the reference fills a [B, N, 9] view of [B, 9, N] memory (its sines' layout),
            # which torch fills element by element, not as a contiguous tensor
            noise = torch.empty(batch, h, n, device=device).transpose(1, 2)
            noise.normal_(generator=generator)
        torch.randn(batch, n, 1, generator=generator, device=device)
        return cls(phase, noise)

    @classmethod
    def silent(cls, cfg: HiftConfig, batch: int, frames: int, device=None) -> HiftNoise:
        """No noise: the harmonics alone (and a zero phase offset)."""
        h, n = cfg.harmonics + 1, cfg.upsample * frames
        shape = (batch, h, n) if cfg.sine == "sinegen" else (batch, n, h)
        return cls(torch.zeros(batch, h, 1, device=device), torch.zeros(shape, device=device))


def hann(n: int) -> torch.Tensor:
    """The periodic Hann window [n] as scipy's get_window("hann", n) computes it (float64
    0.5 + 0.5 cos over n + 1 points from -pi to pi, the last dropped), in float32."""
    angle = np.linspace(-np.pi, np.pi, n + 1)[:-1]
    return torch.from_numpy((0.5 + 0.5 * np.cos(angle)).astype(np.float32))


class F0Predictor(nn.Module):
    """mel [B, 80, M] -> F0 [B, M] in Hz (`condnet.{0,2,4,6,8}`, `classifier`)."""

    def __init__(self, channels: int):
        super().__init__()
        convs = [nn.Conv1d(N_MELS if i == 0 else channels, channels, 3, padding=1)
                 for i in range(5)]
        self.condnet = nn.ModuleDict({str(2 * i): c for i, c in enumerate(convs)})
        self.classifier = Linear(channels, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = mel
        for conv in self.condnet.values():
            x = F.elu(conv(x))
        return self.classifier(x.transpose(1, 2)).squeeze(-1).abs()


class Source(nn.Module):
    """F0 at the audio rate [B, N] -> excitation [B, 1, N] (`l_linear`)."""

    def __init__(self, cfg: HiftConfig):
        super().__init__()
        self.cfg = cfg
        self.l_linear = Linear(cfg.harmonics + 1, 1)

    def forward(self, f0: torch.Tensor, noise: HiftNoise) -> torch.Tensor:
        if self.cfg.sine == "sinegen":
            sines = self._sinegen(f0, noise.phase).transpose(1, 2)  # [B, N, 9]
            drawn = noise.noise.transpose(1, 2)
        else:
            sines, drawn = self._sinegen2(f0), noise.noise
        return self.mix(sines, f0[..., None], drawn)

    def mix(self, sines: torch.Tensor, f0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """sines [B, N, 9] where voiced (f0 [B, N, 1] over the threshold) plus noise [B, N, 9]
        at the voiced or unvoiced amplitude, through `l_linear` and tanh -> [B, 1, N]."""
        cfg = self.cfg
        uv = (f0 > cfg.voiced_threshold).float()
        amp = uv * cfg.noise_std + (1 - uv) * cfg.sine_amp / 3
        return torch.tanh(self.l_linear(sines * uv + amp * noise)).transpose(1, 2)

    def _sinegen(self, f0: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        """[B, 9, N]: amp sin(2 pi (cumsum_t(k f0 / sr) mod 1) + phase_k), k = 1..9."""
        cfg = self.cfg
        steps = torch.stack([f0 * (k + 1) / SAMPLE_RATE for k in range(cfg.harmonics + 1)], 1)
        theta = 2 * math.pi * (torch.cumsum(steps, dim=-1) % 1)
        return cfg.sine_amp * torch.sin(theta + phase)

    def _sinegen2(self, f0: torch.Tensor) -> torch.Tensor:
        """[B, N, 9]: amp sin(phase_k), the phase of harmonic k accumulated per mel frame from
        (k f0 / sr mod 1) averaged over the frame by linear interpolation, then interpolated
        back to the audio rate."""
        cfg = self.cfg
        harmonic = torch.arange(1, cfg.harmonics + 2, dtype=torch.float32, device=f0.device)
        rad = (f0[..., None] * harmonic / SAMPLE_RATE) % 1  # [B, N, 9]
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / cfg.upsample, mode="linear")
        phase = torch.cumsum(rad.transpose(1, 2), dim=1) * 2 * math.pi
        phase = F.interpolate(phase.transpose(1, 2) * cfg.upsample,
                              scale_factor=cfg.upsample, mode="linear")
        return torch.sin(phase.transpose(1, 2)) * cfg.sine_amp


class ResBlock(nn.Module):
    """Three times x += conv_k(snake(conv_k,dilation d(snake(x)))), d = 1, 3, 5."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = nn.ModuleList(nn.Conv1d(channels, channels, kernel, dilation=d,
                                              padding=d * (kernel - 1) // 2) for d in dilations)
        self.convs2 = nn.ModuleList(nn.Conv1d(channels, channels, kernel,
                                              padding=(kernel - 1) // 2) for _ in dilations)
        self.activations1 = nn.ModuleList(Snake1d(channels) for _ in dilations)
        self.activations2 = nn.ModuleList(Snake1d(channels) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.activations1,
                                  self.activations2, strict=True):
            x = c2(a2(c1(a1(x)))) + x
        return x


class HiFT(nn.Module):
    def __init__(self, cfg: HiftConfig):
        super().__init__()
        self.config = cfg
        c = cfg.base_channels
        self.f0_predictor = F0Predictor(cfg.f0_channels)
        self.m_source = Source(cfg)
        self.conv_pre = nn.Conv1d(N_MELS, c, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(c >> i, c >> (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(cfg.upsample_rates, cfg.upsample_kernels,
                                           strict=True)))
        # the excitation's spectrum brought to each stage's rate
        spec = cfg.n_fft + 2
        rates = [1, *cfg.upsample_rates[::-1][:-1]]
        cumulative = [math.prod(rates[: i + 1]) for i in range(len(rates))][::-1]
        self.source_downs = nn.ModuleList(
            nn.Conv1d(spec, c >> (i + 1), 1) if u == 1 else
            nn.Conv1d(spec, c >> (i + 1), 2 * u, u, padding=u // 2)
            for i, u in enumerate(cumulative))
        self.source_resblocks = nn.ModuleList(
            ResBlock(c >> (i + 1), k, cfg.resblock_dilations)
            for i, k in enumerate(cfg.source_kernels))
        self.resblocks = nn.ModuleList(
            ResBlock(c >> (i + 1), k, cfg.resblock_dilations)
            for i in range(len(cfg.upsample_rates)) for k in cfg.resblock_kernels)
        self.conv_post = nn.Conv1d(c >> len(cfg.upsample_rates), spec, 7, padding=3)
        self.register_buffer("window", hann(cfg.n_fft), persistent=False)

    def excitation(self, mel: torch.Tensor, noise: HiftNoise) -> torch.Tensor:
        """mel [B, 80, M] -> the source [B, 1, 480 M]."""
        f0 = self.f0_predictor(mel)
        f0 = F.interpolate(f0[:, None], scale_factor=self.config.upsample)[:, 0]  # nearest
        return self.m_source(f0, noise)

    def forward(self, mel: torch.Tensor, noise: HiftNoise) -> torch.Tensor:
        """mel [B, 80, M] -> audio [B, 1, 480 M]."""
        return self.generate(mel, self.excitation(mel, noise))

    def generate(self, mel: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        spec = self._stft(source)  # [B, 18, 120 M + 1]: real parts, then imaginary
        x = self.conv_pre(mel)
        kernels = len(cfg.resblock_kernels)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, cfg.lrelu_slope))
            if i == len(self.ups) - 1:
                x = F.pad(x, (1, 0), mode="reflect")
            x = x + self.source_resblocks[i](self.source_downs[i](spec))
            blocks = self.resblocks[i * kernels: (i + 1) * kernels]
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / kernels
        x = self.conv_post(F.leaky_relu(x))  # (the default slope, 0.01, as the reference)
        half = cfg.n_fft // 2 + 1
        magnitude = torch.exp(x[:, :half]).clamp(max=1e2)
        phase = torch.sin(x[:, half:])
        audio = self._istft(magnitude, phase)
        return audio.clamp(-cfg.audio_limit, cfg.audio_limit)[:, None]

    def _stft(self, source: torch.Tensor) -> torch.Tensor:
        """source [B, 1, N] -> [B, n_fft + 2, N / hop + 1]: the centred (reflect-padded)
        windowed spectrum's real and imaginary parts; when exporting, as one convolution with
        the windowed DFT's rows (float64 tables, float32 products)."""
        n, hop = self.config.n_fft, self.config.hop
        if not exporting():
            spec = torch.stft(source[:, 0], n, hop, n, window=self.window, return_complex=True)
            return torch.cat([spec.real, spec.imag], 1)
        k = torch.arange(n // 2 + 1, dtype=torch.float64)[:, None]
        angle = 2 * math.pi * ((k * torch.arange(n, dtype=torch.float64)) % n) / n
        window = self.window.double()
        rows = torch.cat([angle.cos() * window, -angle.sin() * window]).float()
        padded = F.pad(source, (n // 2, n // 2), mode="reflect")
        return F.conv1d(padded, rows[:, None], stride=hop)

    def _istft(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        """torch.istft of polar(magnitude, phase) [B, n_fft / 2 + 1, T] (centred, the Hann
        window's squared envelope divided out) -> [B, hop (T - 1)]."""
        n, hop = self.config.n_fft, self.config.hop
        if not exporting():
            spectrum = torch.complex(magnitude * torch.cos(phase), magnitude * torch.sin(phase))
            return torch.istft(spectrum, n, hop, n, window=self.window)
        frames = irfft_polar(magnitude.transpose(1, 2), phase.transpose(1, 2), n)
        frames = frames.transpose(1, 2) * self.window[None, :, None]
        envelope = overlap_add(self.window.square()[None, :, None].expand(
            1, -1, frames.shape[-1]), hop)
        out = overlap_add(frames, hop) / envelope
        return out[:, n // 2: out.shape[-1] - n // 2]
