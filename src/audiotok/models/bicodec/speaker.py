"""BiCodec's speaker branch: an ECAPA-TDNN over the reference clip's mel spectrogram, a
perceiver that pools its frames into 32 latents, and an FSQ that turns each latent into one of
4096 global tokens; and back, the tokens into the d-vector the decoder is conditioned on.

Module names are Spark's (`speaker_encoder.layer2.se_res2block.1.convs.0`,
`perceiver_sampler.layers.0.0.to_kv`, `quantizer.project_in`), so its state dict loads as it
is (the ECAPA's pooling head, unused for tokens, is not kept). Batch norms run on their stored
statistics.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.fsq import FSQ
from ...nn.tracing import exporting
from .config import BiCodecConfig

ECAPA_CHANNELS = 512  # Spark's ECAPA_TDNN_GLOB_c512: fixed widths, not in its config
RES2_SCALE = 8
CONTEXT_DIM = 3 * ECAPA_CHANNELS  # the ECAPA's latent: three blocks' outputs, concatenated
HEADS, HEAD_DIM, DEPTH = 8, 64, 2  # the perceiver's


class BatchNorm(nn.Module):
    """Batch norm on stored statistics (eval only): (x - mean) / sqrt(var + 1e-5) * w + b over
    channels [B, C, T]; the names of torch's BatchNorm1d, without its step counter."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            False, 0.0, 1e-5)


class ConvReluBn(nn.Module):
    """BN(ReLU(conv(x)))."""

    def __init__(self, c_in: int, c_out: int, kernel: int = 1, padding: int = 0,
                 dilation: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, padding=padding, dilation=dilation)
        self.bn = BatchNorm(c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(F.relu(self.conv(x)))


class Res2Conv(nn.Module):
    """Res2Net's split convolution: channels in `scale` chunks; chunk i > 0 (but the last) adds
    the previous chunk's output before its own BN(ReLU(conv)); the last chunk passes."""

    def __init__(self, channels: int, kernel: int, dilation: int, scale: int):
        super().__init__()
        self.width = channels // scale
        self.convs = nn.ModuleList(
            nn.Conv1d(self.width, self.width, kernel, padding=dilation, dilation=dilation)
            for _ in range(scale - 1))
        self.bns = nn.ModuleList(BatchNorm(self.width) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = torch.split(x, self.width, 1)
        out, y = [], chunks[0]
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns, strict=True)):
            if i:
                y = y + chunks[i]
            y = bn(F.relu(conv(y)))
            out.append(y)
        return torch.cat([*out, chunks[-1]], 1)


class SqueezeExcite(nn.Module):
    """x * sigmoid(linear2(ReLU(linear1(mean over time of x))))."""

    def __init__(self, channels: int, bottleneck: int = 128):
        super().__init__()
        self.linear1 = nn.Linear(channels, bottleneck)
        self.linear2 = nn.Linear(bottleneck, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.linear2(F.relu(self.linear1(x.mean(dim=2)))))
        return x * s.unsqueeze(2)


class SERes2Block(nn.Module):
    """x + SE(conv1x1(Res2(conv1x1(x))))."""

    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.se_res2block = nn.Sequential(
            ConvReluBn(channels, channels), Res2Conv(channels, 3, dilation, RES2_SCALE),
            ConvReluBn(channels, channels), SqueezeExcite(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.se_res2block(x)


class Ecapa(nn.Module):
    """Mel frames [B, mels, T] -> the latent [B, 1536, T]: ReLU(conv(cat of blocks 2-4))."""

    def __init__(self, mels: int):
        super().__init__()
        c = ECAPA_CHANNELS
        self.layer1 = ConvReluBn(mels, c, 5, padding=2)
        self.layer2, self.layer3, self.layer4 = (SERes2Block(c, d) for d in (2, 3, 4))
        self.conv = nn.Conv1d(3 * c, CONTEXT_DIM, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        out2 = self.layer2(self.layer1(mel))
        out3 = self.layer3(out2)
        out4 = self.layer4(out3)
        return F.relu(self.conv(torch.cat([out2, out3, out4], dim=1)))


class Attention(nn.Module):
    """Multi-head attention of the latents over [latents, context] (no biases, no mask):
    softmax(q k^T * 64^-0.5) v, as the reference computes it (products, then the scale)."""

    def __init__(self, dim: int):
        super().__init__()
        inner = HEADS * HEAD_DIM
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_kv = nn.Linear(dim, 2 * inner, bias=False)
        self.to_out = nn.Linear(inner, dim, bias=False)

    def forward(self, latents: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, n, _ = latents.shape
        context = torch.cat([latents, context], dim=1)
        k, v = self.to_kv(context).chunk(2, dim=-1)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, t.shape[1], HEADS, HEAD_DIM).transpose(1, 2)

        q, k, v = heads(self.to_q(latents)), heads(k), heads(v)
        attn = (torch.matmul(q, k.transpose(-1, -2)) * HEAD_DIM**-0.5).softmax(dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, HEADS * HEAD_DIM)
        return self.to_out(out)


class GEGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, gate = x.chunk(2, dim=-1)
        return F.gelu(gate) * x


def feed_forward(dim: int, mult: int = 4) -> nn.Sequential:
    inner = int(dim * mult * 2 / 3)
    return nn.Sequential(nn.Linear(dim, 2 * inner), GEGLU(), nn.Linear(inner, dim))


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.scale = dim**0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * self.scale * self.gamma


class Perceiver(nn.Module):
    """Context [B, T, 1536] -> latents [B, tokens, dim]: learned latents attend (twice) to
    themselves and the projected context, each attention and feed-forward residual."""

    def __init__(self, dim: int, tokens: int):
        super().__init__()
        self.proj_context = nn.Linear(CONTEXT_DIM, dim)
        self.latents = nn.Parameter(torch.zeros(tokens, dim))
        self.layers = nn.ModuleList(nn.ModuleList([Attention(dim), feed_forward(dim)])
                                    for _ in range(DEPTH))
        self.norm = RMSNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj_context(x)
        latents = self.latents.expand(x.shape[0], -1, -1)
        for attn, ff in self.layers:
            latents = attn(latents, x) + latents
            latents = ff(latents) + latents
        return self.norm(latents)


class SpeakerFSQ(nn.Module):
    """One FSQ between linear projections (Spark's ResidualFSQ with one quantizer)."""

    def __init__(self, dim: int, levels: tuple[int, ...]):
        super().__init__()
        self.project_in = nn.Linear(dim, len(levels))
        self.project_out = nn.Linear(len(levels), dim)
        self.fsq = FSQ(levels)

    def indices(self, x: torch.Tensor) -> torch.Tensor:
        """[..., dim] -> indices [...] (int64)."""
        return self.fsq.indices(self.project_in(x))

    def decode(self, indices: torch.Tensor) -> torch.Tensor:
        """indices [...] -> [..., dim]."""
        return self.project_out(self.fsq.codes(indices).to(self.project_out.weight.dtype))


class SpeakerEncoder(nn.Module):
    """Mel [B, mels, T] -> global tokens [B, tokens]; tokens -> d-vector [B, speaker_dim]."""

    def __init__(self, cfg: BiCodecConfig):
        super().__init__()
        self.speaker_encoder = Ecapa(cfg.num_mels)
        self.perceiver_sampler = Perceiver(cfg.speaker_latent_dim, cfg.global_tokens)
        self.quantizer = SpeakerFSQ(cfg.speaker_latent_dim, cfg.fsq_levels)
        self.project = nn.Linear(cfg.speaker_latent_dim * cfg.global_tokens, cfg.speaker_dim)

    def tokenize(self, mel: torch.Tensor) -> torch.Tensor:
        latent = self.speaker_encoder(mel)
        return self.quantizer.indices(self.perceiver_sampler(latent.transpose(1, 2)))

    def detokenize(self, tokens: torch.Tensor) -> torch.Tensor:
        z = self.quantizer.decode(tokens)  # [B, tokens, dim]
        return self.project(z.transpose(1, 2).reshape(z.shape[0], -1))  # channel-major


def mel_filters(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int
                ) -> torch.Tensor:
    """[n_freqs, n_mels] float32 triangles on the Slaney mel scale with Slaney area
    normalisation, computed as torchaudio's melscale_fbanks computes them (float32)."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0

    def hz_to_mel(f: float) -> float:
        return min_log_mel + math.log(f / min_log_hz) / logstep if f >= min_log_hz else f / f_sp

    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    m_pts = torch.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2)
    f_pts = f_sp * m_pts
    log_t = m_pts >= min_log_mel
    f_pts[log_t] = min_log_hz * torch.exp(logstep * (m_pts[log_t] - min_log_mel))
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = torch.max(torch.zeros(1), torch.min(down, up))
    return fb * (2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels])).unsqueeze(0)


class MelSpectrogram(nn.Module):
    """Audio [B, N] -> magnitude mel frames [B, mels, N // hop + 1] (torchaudio's
    MelSpectrogram with power 1: a periodic Hann window, centred with reflect padding, no
    log), in float32."""

    def __init__(self, cfg: BiCodecConfig):
        super().__init__()
        self.n_fft, self.hop, self.win = cfg.n_fft, cfg.hop_length, cfg.win_length
        cpu = torch.device("cpu")  # constants, also when the model is built on the meta device
        with torch.device(cpu):
            window = torch.hann_window(cfg.win_length)
            fb = mel_filters(cfg.n_fft // 2 + 1, cfg.mel_fmin, cfg.mel_fmax or
                             cfg.sample_rate / 2, cfg.num_mels, cfg.sample_rate)
        self.register_buffer("window", window, persistent=False)
        self.register_buffer("fb", fb, persistent=False)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        x = audio.float()
        if exporting():
            spec = self._magnitude_dft(x)
        else:
            spec = torch.stft(x, self.n_fft, self.hop, self.win, self.window, center=True,
                              pad_mode="reflect", normalized=False, onesided=True,
                              return_complex=True).abs()
        return torch.matmul(spec.transpose(-1, -2), self.fb).transpose(-1, -2)

    def _magnitude_dft(self, x: torch.Tensor) -> torch.Tensor:
        """|STFT| [B, n_fft // 2 + 1, frames] as float64 real DFT matrix products (an exported
        graph holds no complex tensors), the magnitude of the float32-rounded parts taken in
        float64 (as complex64's abs rounds it)."""
        n = self.n_fft
        padded = F.pad(x[:, None], (n // 2, n // 2), mode="reflect")[:, 0]
        left = (n - self.win) // 2  # the window centred in the frame, zeros around it
        window = F.pad(self.window, (left, n - self.win - left))
        frames = (padded.unfold(-1, n, self.hop) * window).double()  # [B, F, n]
        k = torch.arange(n // 2 + 1, dtype=torch.float64, device=x.device)[None, :]
        t = torch.arange(n, dtype=torch.float64, device=x.device)[:, None]
        angle = 2 * math.pi * ((t * k) % n) / n
        real, imag = (frames @ angle.cos()).float(), (frames @ angle.sin()).float()
        return (real.double() ** 2 + imag.double() ** 2).sqrt().float().transpose(1, 2)
