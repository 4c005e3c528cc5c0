"""The SNAC network: a DAC-style Snake/convolution encoder (depthwise residual units, optional
local attention), a residual VQ whose levels run at different rates (average-pooled by their
stride), and a decoder of transposed convolutions with a noise block after each. No part is
causal.

Module names are the reference's (`snac` 1.2.1) with weight norm folded, so its state dict
loads as it is. Tokens are one [B, K, T] array over coarse frames: the levels' codes of each
frame in rows, level by level, each level's codes in time order (24 kHz: row 0 level 0, rows
1-2 level 1 at 2t and 2t + 1, rows 3-6 level 2 at 4t..4t + 3).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.activations import Snake1d
from ...nn.conv import Conv1d, ConvTranspose1d
from ...nn.linear import Linear
from ...nn.snake_blocks import EncoderBlock, residual_units
from .config import SnacConfig
from .noise import NOISE_MODES, position_normal


class NoiseBlock(nn.Module):
    """x + n * conv1x1(x), n one standard normal per (item, time) shared by the channels.

    Where n comes from is the decoder's `noise` setting (see noise.py): "seeded" draws it from
    the seed and each step's absolute position, "torch" from torch's global generator as the
    reference does, "off" drops the block's term."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = Conv1d(dim, dim, 1, bias=False)

    def forward(self, x: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        if noise is None:
            return x
        return x + noise * self.linear(x)


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, out: int, stride: int, noise: bool, groups: int):
        super().__init__()
        layers = [Snake1d(dim),
                  ConvTranspose1d(dim, out, 2 * stride, stride=stride,
                                     padding=math.ceil(stride / 2), output_padding=stride % 2)]
        if noise:
            layers.append(NoiseBlock(out))
        self.block = nn.Sequential(*layers, *residual_units(out, groups))

    def forward(self, x: torch.Tensor, draw) -> torch.Tensor:
        for layer in self.block:
            x = layer(x, draw(x)) if isinstance(layer, NoiseBlock) else layer(x)
        return x


class LocalMHA(nn.Module):
    """Pre-LayerNorm multi-head self-attention within consecutive windows of `window` frames
    (positions restart in each), rotate-half RoPE, no mask; plus the input."""

    def __init__(self, dim: int, window: int, head_dim: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.heads = dim // head_dim
        self.window = window
        self.to_qkv = Linear(dim, 3 * dim, bias=False)
        self.to_out = Linear(dim, dim, bias=False)
        self.head_dim = head_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t = x.shape
        w = t // self.window
        qkv = self.to_qkv(self.norm(x.transpose(1, 2)))  # (slices: ONNX export folds chunk badly)
        q, k, v = qkv[..., :c], qkv[..., c : 2 * c], qkv[..., 2 * c :]

        def heads(y):  # [B, T, H * D] -> [B * H, windows, window, D] (4-D for ONNX's SDPA)
            y = y.reshape(b, w, t // w, self.heads, -1).permute(0, 3, 1, 2, 4)
            return y.reshape(b * self.heads, w, t // w, -1)

        q, k, v = heads(q), heads(k), heads(v)
        d = self.head_dim
        inv_freq = 1.0 / 10000 ** (torch.arange(0, d, 2, device=x.device).float() / d)
        freqs = torch.arange(t // w, device=x.device).float()[:, None] * inv_freq[None, :]
        freqs = torch.cat((freqs, freqs), dim=-1)
        cos, sin = freqs.cos(), freqs.sin()
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v).reshape(b, self.heads, w, t // w, -1)
        y = y.permute(0, 2, 3, 1, 4).reshape(b, t, c)
        return self.to_out(y).transpose(1, 2) + x


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Encoder(nn.Module):
    def __init__(self, cfg: SnacConfig):
        super().__init__()
        dim = cfg.encoder_dim
        layers: list[nn.Module] = [Conv1d(1, dim, 7, padding=3)]
        for stride in cfg.encoder_rates:
            layers.append(EncoderBlock(dim, stride, dim if cfg.depthwise else 1))
            dim *= 2
        if cfg.attn_window_size is not None:
            layers.append(LocalMHA(dim, cfg.attn_window_size))
        layers.append(Conv1d(dim, dim, 7, padding=3, groups=dim if cfg.depthwise else 1))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Decoder(nn.Module):
    def __init__(self, cfg: SnacConfig):
        super().__init__()
        d, c = cfg.latent_dim, cfg.decoder_dim
        if cfg.depthwise:
            layers: list[nn.Module] = [Conv1d(d, d, 7, padding=3, groups=d), Conv1d(d, c, 1)]
        else:
            layers = [Conv1d(d, c, 7, padding=3)]
        if cfg.attn_window_size is not None:
            layers.append(LocalMHA(c, cfg.attn_window_size))
        for i, stride in enumerate(cfg.decoder_rates):
            dim, out = c // 2**i, c // 2 ** (i + 1)
            layers.append(DecoderBlock(dim, out, stride, cfg.noise,
                                       out if cfg.depthwise else 1))
        layers += [Snake1d(out), Conv1d(out, 1, 7, padding=3), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, draw) -> torch.Tensor:
        for layer in self.model:
            x = layer(x, draw) if isinstance(layer, DecoderBlock) else layer(x)
        return x


class VectorQuantize(nn.Module):
    """One level: average-pool by `stride`, project to the codebook space, nearest
    L2-normalised codebook entry; its raw entry projected back and repeated `stride` times."""

    def __init__(self, dim: int, size: int, codebook_dim: int, stride: int):
        super().__init__()
        self.stride = stride
        self.in_proj = Conv1d(dim, codebook_dim, 1)
        self.out_proj = Conv1d(codebook_dim, dim, 1)
        self.codebook = nn.Embedding(size, codebook_dim)

    def encode(self, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(codes [B, T / stride], the level's output at the input's rate)."""
        z = F.avg_pool1d(residual, self.stride, self.stride) if self.stride > 1 else residual
        z_e = self.in_proj(z)
        b, d, t = z_e.shape
        rows = F.normalize(z_e.transpose(1, 2).reshape(b * t, d))
        book = F.normalize(self.codebook.weight)
        # the reference's distance, term by term and in its order (near ties must break alike)
        dist = rows.pow(2).sum(1, keepdim=True) - 2 * rows @ book.t() \
            + book.pow(2).sum(1, keepdim=True).t()
        codes = (-dist).max(1)[1].view(b, t)
        z_q = F.embedding(codes, self.codebook.weight).transpose(1, 2)
        z_q = z_e + (z_q - z_e)  # the reference's straight-through form (not bitwise z_q)
        return codes, self._out(z_q)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self._out(F.embedding(codes, self.codebook.weight).transpose(1, 2))

    def _out(self, z_q: torch.Tensor) -> torch.Tensor:
        y = self.out_proj(z_q)
        return y.repeat_interleave(self.stride, dim=-1) if self.stride > 1 else y


class ResidualVQ(nn.Module):
    def __init__(self, cfg: SnacConfig):
        super().__init__()
        self.quantizers = nn.ModuleList(
            VectorQuantize(cfg.latent_dim, cfg.codebook_size, cfg.codebook_dim, s)
            for s in cfg.vq_strides)

    def encode(self, z: torch.Tensor) -> list[torch.Tensor]:
        codes, residual = [], z
        for q in self.quantizers:
            c, out = q.encode(residual)
            residual = residual - out
            codes.append(c)
        return codes

    def decode(self, codes: list[torch.Tensor]) -> torch.Tensor:
        z = self.quantizers[0].decode(codes[0])
        for q, c in zip(self.quantizers[1:], codes[1:], strict=True):
            z = z + q.decode(c)
        return z


class SnacModel(nn.Module):
    """encode(audio [B, 1, N], N a multiple of config.pad_frames coarse frames) -> tokens
    [B, K, T]; decode(tokens) -> audio [B, 1, T * samples_per_frame]."""

    def __init__(self, cfg: SnacConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.quantizer = ResidualVQ(cfg)
        self.decoder = Decoder(cfg)
        self.noise = "seeded"  # the codec's setting (noise.py): "seeded", "torch" or "off"
        self.seed = 0

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        return levels_to_rows(self.quantizer.encode(self.encoder(audio)), self.config)

    def decode(self, tokens: torch.Tensor, frame_offset: int | torch.Tensor = 0
               ) -> torch.Tensor:
        """frame_offset (one, or per row [B]): the coarse frame tokens[..., 0] is in its stream
        (seeded noise is a function of absolute position, so a window of a stream gets the
        whole's noise)."""
        z = self.quantizer.decode(rows_to_levels(tokens, self.config))
        blocks = iter(range(len(self.config.decoder_rates)))
        frames = tokens.shape[-1]

        def draw(x: torch.Tensor) -> torch.Tensor | None:
            t = x.shape[-1]
            first = torch.as_tensor(frame_offset, device=x.device).long().reshape(-1, 1)
            return self.noise_at(next(blocks), first * (t // frames)
                                 + torch.arange(t, device=x.device), x)

        if self.noise not in NOISE_MODES:
            raise ValueError(f"noise must be one of {NOISE_MODES}, got {self.noise!r}")
        return self.decoder(z, draw)

    def noise_at(self, block: int, positions: torch.Tensor, x: torch.Tensor
                 ) -> torch.Tensor | None:
        """Noise block `block`'s values [B, 1, T] for x [B, C, T] whose steps sit at
        `positions` ([1 or B, T]) of the stream (None: noise off)."""
        if self.noise == "off":
            return None
        b, _, t = x.shape
        if self.noise == "torch":
            return torch.randn((b, 1, t), device=x.device, dtype=x.dtype)
        return position_normal(self.seed, block, positions, x.dtype)[:, None].expand(b, 1, t)

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the codebook search."""
        return [self.quantizer]


def levels_to_rows(codes: list[torch.Tensor], cfg: SnacConfig) -> torch.Tensor:
    """Per-level codes [B, T * n_level] (coarsest first) -> tokens [B, K, T]."""
    b, frames = codes[0].shape[0], codes[0].shape[-1]
    return torch.cat([c.reshape(b, frames, n).transpose(1, 2)
                      for c, n in zip(codes, cfg.codes_per_level, strict=True)], 1)


def rows_to_levels(tokens: torch.Tensor, cfg: SnacConfig) -> list[torch.Tensor]:
    """Tokens [B, K, T] -> per-level codes [B, T * n_level], coarsest first."""
    b, _, frames = tokens.shape
    out, row = [], 0
    for n in cfg.codes_per_level:
        out.append(tokens[:, row : row + n].transpose(1, 2).reshape(b, frames * n))
        row += n
    return out
