"""The NanoCodec network (NeMo's HiFiGANEncoder, GroupFiniteScalarQuantizer and
CausalHiFiGANDecoder): a non-causal HiFi-GAN encoder (LeakyReLU, "same" padding by
replication), a group FSQ without parameters, and a causal HiFi-GAN decoder (HalfSnake:
Snake on half the channels, LeakyReLU on the rest; grouped causal transposed convolutions;
output clamped to [-1, 1]), which streams exactly (nn/conv's causal layers keep their state).

Module names are NeMo's with weight norm folded, so the .nemo's state dict loads as it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.activations import Snake1d
from ...nn.conv import CausalConv1d, CausalConvTranspose1d
from ...nn.tracing import exporting
from .config import NanoCodecConfig


class SameConv(nn.Module):
    """Conv1d with "same" padding in `mode` (replicate, reflect or zeros) on both sides
    (NeMo's Conv1dNorm); `padding` defaults to (kernel - 1) x dilation / 2. torch's own
    convolution, as NeMo runs it: the FSQ rounds every latent, so the encoder keeps the
    reference's sums (other kernel forms move latents by 1e-7 relative and, at a rounding
    boundary, a code)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, dilation: int = 1,
                 padding: int | None = None, mode: str = "replicate"):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, dilation=dilation)
        self.padding = (kernel * dilation - dilation) // 2 if padding is None else padding
        self.mode = "constant" if mode == "zeros" else mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        if self.mode == "constant":
            return F.conv1d(x, c.weight, c.bias, c.stride, self.padding, c.dilation)
        x = F.pad(x, (self.padding, self.padding), mode=self.mode)
        return F.conv1d(x, c.weight, c.bias, c.stride, 0, c.dilation)


class HalfSnake(nn.Module):
    """Snake on the first channels // 2 channels, LeakyReLU (0.01) on the rest. Both halves are
    written into one output laid out as the convolutions' channels-last activations (NeMo
    concatenates them, which here would cost a copy into and out of another layout)."""

    def __init__(self, channels: int):
        super().__init__()
        self.snake_act = Snake1d(channels // 2)
        self.half = channels // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.half
        if exporting():
            return torch.cat([self.snake_act(x[:, :h]), F.leaky_relu(x[:, h:])], 1)
        b, c, t = x.shape
        y = x.new_empty(b, t, c).transpose(1, 2)
        snake, leaky = y[:, :h], y[:, h:]
        # Snake1d's operations, in its order: x + sin(alpha x)^2 / (alpha + 1e-9)
        alpha = self.snake_act.alpha
        torch.mul(x[:, :h], alpha, out=snake)
        snake.sin_().square_().mul_((alpha + 1e-9).reciprocal()).add_(x[:, :h])
        # LeakyReLU: x where x > 0, else 0.01 x; that is the larger of x and 0.01 x
        torch.mul(x[:, h:], 0.01, out=leaky)
        torch.maximum(x[:, h:], leaky, out=leaky)
        return y


class Activation(nn.Module):
    """NeMo's CodecActivation: `activation` is LeakyReLU or HalfSnake."""

    def __init__(self, half_snake: bool, channels: int):
        super().__init__()
        self.activation = HalfSnake(channels) if half_snake else nn.LeakyReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(x)


class ResidualBlock(nn.Module):
    """x + skip_conv(act(input_conv(act(x)))): the input convolution dilated, the skip one not;
    causal (the decoder's) or "same" (the encoder's)."""

    def __init__(self, channels: int, kernel: int, dilation: int, causal: bool, mode: str):
        super().__init__()
        self.input_activation = Activation(causal, channels)
        self.skip_activation = Activation(causal, channels)
        if causal:
            self.input_conv = CausalConv1d(channels, channels, kernel, dilation=dilation)
            self.skip_conv = CausalConv1d(channels, channels, kernel)
        else:
            self.input_conv = SameConv(channels, channels, kernel, dilation=dilation, mode=mode)
            self.skip_conv = SameConv(channels, channels, kernel, mode=mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.skip_conv(self.skip_activation(self.input_conv(self.input_activation(x))))


class ResBlock(nn.Module):
    """Residual blocks of one kernel at each dilation, in turn."""

    def __init__(self, channels: int, kernel: int, cfg: NanoCodecConfig, causal: bool):
        super().__init__()
        self.res_blocks = nn.ModuleList(
            ResidualBlock(channels, kernel, d, causal, cfg.encoder_pad_mode)
            for d in cfg.resblock_dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.res_blocks:
            x = block(x)
        return x


class ResLayer(nn.Module):
    """The mean of one ResBlock per kernel size (NeMo's sum(list) / n)."""

    def __init__(self, channels: int, cfg: NanoCodecConfig, causal: bool):
        super().__init__()
        self.res_blocks = nn.ModuleList(ResBlock(channels, k, cfg, causal)
                                        for k in cfg.resblock_kernels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residuals = [block(x) for block in self.res_blocks]
        return sum(residuals) / len(residuals)


class Encoder(nn.Module):
    """Audio [B, 1, N] (N whole frames) -> latents [B, D, N / samples_per_frame]."""

    def __init__(self, cfg: NanoCodecConfig):
        super().__init__()
        mode, (k_in, k_out) = cfg.encoder_pad_mode, cfg.encoder_kernels
        c = cfg.encoder_channels
        self.pre_conv = SameConv(1, c, k_in, mode=mode)
        self.res_layers, self.activations = nn.ModuleList(), nn.ModuleList()
        self.down_sample_conv_layers = nn.ModuleList()
        for s in cfg.down_sample_rates:
            self.res_layers.append(ResLayer(c, cfg, causal=False))
            self.activations.append(Activation(False, c))
            self.down_sample_conv_layers.append(
                SameConv(c, 2 * c, 2 * s, stride=s, padding=(s + 1) // 2, mode=mode))
            c *= 2
        self.post_activation = Activation(False, c)
        self.post_conv = SameConv(c, cfg.latent_dim, k_out, mode=mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre_conv(x)
        for res, act, down in zip(self.res_layers, self.activations,
                                  self.down_sample_conv_layers, strict=True):
            x = down(act(res(x)))
        return self.post_conv(self.post_activation(x))


class Decoder(nn.Module):
    """Latents [B, D, T] -> audio [B, 1, T x samples_per_frame] in [-1, 1]; causal."""

    def __init__(self, cfg: NanoCodecConfig):
        super().__init__()
        k_in, k_out = cfg.decoder_kernels
        c = cfg.decoder_channels
        self.pre_conv = CausalConv1d(cfg.latent_dim, c, k_in)
        self.activations, self.up_sample_conv_layers = nn.ModuleList(), nn.ModuleList()
        self.res_layers = nn.ModuleList()
        for s in cfg.up_sample_rates:
            self.activations.append(Activation(True, c))
            self.up_sample_conv_layers.append(
                CausalConvTranspose1d(c, c // 2, 2 * s, stride=s, groups=c // 2))
            c //= 2
            self.res_layers.append(ResLayer(c, cfg, causal=True))
        self.post_activation = Activation(True, c)
        self.post_conv = CausalConv1d(c, 1, k_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre_conv(x)
        for act, up, res in zip(self.activations, self.up_sample_conv_layers, self.res_layers,
                                strict=True):
            x = res(up(act(x)))
        return self.post_conv(self.post_activation(x)).clamp(-1.0, 1.0)


class GroupFSQ(nn.Module):
    """NeMo's GroupFiniteScalarQuantizer: the latent's channels in `num_groups` consecutive
    groups, each dimension squashed (tanh) to its levels and rounded; a group's index is its
    dimensions' values in mixed radix (the first dimension least significant). The same float32
    operations as NeMo's, in its order."""

    def __init__(self, cfg: NanoCodecConfig):
        super().__init__()
        self.groups, self.levels = cfg.num_groups, cfg.levels
        self.base = tuple(math.prod(cfg.levels[:i]) for i in range(len(cfg.levels)))
        self.eps = 1e-3

    def _radix(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(levels, base) [1, dims, 1] int32: each dimension's levels and place value."""
        levels = torch.tensor(self.levels, dtype=torch.int32, device=device)
        base = torch.tensor(self.base, dtype=torch.int32, device=device)
        return levels.view(1, -1, 1), base.view(1, -1, 1)

    def encode(self, latents: torch.Tensor) -> torch.Tensor:
        """Indices [B, groups, T] (int64) of latents [B, D, T]."""
        levels, base = self._radix(latents.device)
        scale = (levels - 1) / 2 * (1 - self.eps)
        offset = torch.where(levels % 2 == 0, 0.5, 0)
        shift = (offset / scale).tan()
        half = levels // 2
        out = []
        for x in latents.float().chunk(self.groups, dim=1):
            compressed = scale * (x + shift).tanh() - offset
            codes = (compressed + (torch.round(compressed) - compressed)) / half
            out.append(torch.sum((half * codes + half) * base, dim=1).to(torch.int32))
        return torch.stack(out, 1).long()

    def decode(self, indices: torch.Tensor) -> torch.Tensor:
        """Latents [B, D, T] (float32) of indices [B, groups, T]; out-of-range ids wrap, as
        NeMo's do."""
        levels, base = self._radix(indices.device)
        half = levels // 2
        out = []
        for i in range(indices.shape[1]):
            idx = indices[:, i : i + 1].to(torch.int32)
            out.append(((idx // base) % levels - half) / half)
        return torch.cat(out, 1)


class NanoCodecModel(nn.Module):
    """encode(audio [B, 1, N], N whole frames) -> codes [B, groups, T]; decode(codes) -> audio
    [B, 1, T x samples_per_frame]."""

    def __init__(self, cfg: NanoCodecConfig):
        super().__init__()
        self.config = cfg
        self.audio_encoder = Encoder(cfg)
        self.vector_quantizer = GroupFSQ(cfg)
        self.audio_decoder = Decoder(cfg)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        return self.vector_quantizer.encode(self.audio_encoder(audio))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        latents = self.vector_quantizer.decode(codes)
        return self.audio_decoder(latents.to(self.audio_decoder.pre_conv.conv.weight.dtype))

    def stream_roots(self, kind: str) -> list[nn.Module]:
        """The modules that hold streaming state on the decode path (the encoder does not
        stream)."""
        return [self.audio_decoder]

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the FSQ."""
        return [self.vector_quantizer]
