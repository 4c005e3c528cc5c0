"""The S3 tokenizer: log-mel -> two strided convolutions -> a Whisper-style pre-norm transformer
(v2/v3: rotary positions and an FSMN memory) -> one code per 40 ms (20 ms for v1).

Module and tensor names are s3tokenizer's (the converted official ONNX files), so its
checkpoints load as they are."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.linear import Linear
from .config import S3Config

HEAD = 64  # channels a head (the rotary table's width)
ROPE_POSITIONS = 2048  # the rotary table's rows (s3tokenizer's; a 30 s window has 750 tokens)


def lengths_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, width] True where a position is inside its item."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def conv_lengths(lengths: torch.Tensor, stride: int) -> torch.Tensor:
    """Output lengths of a kernel-3, padding-1 convolution of this stride."""
    return (lengths - 1) // stride + 1


def rope_table(positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [positions, 64]: angles t / 10000^(2j/64), j < 32, each row the 32 values
    twice (s3tokenizer's complex polar table), on the CPU (also when the model is built on
    the meta device)."""
    freqs = 1.0 / (10000.0 ** (torch.arange(0, HEAD, 2, device="cpu")[: HEAD // 2].float()
                               / HEAD))
    angles = torch.outer(torch.arange(positions, device="cpu"), freqs).float()
    table = torch.view_as_real(torch.polar(torch.ones_like(angles), angles))
    cos, sin = table[..., 0], table[..., 1]
    return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x [B, T, H, 64] with cos, sin [T, 64]."""
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos[None, :, None] + turned * sin[None, :, None]


def sinusoids(length: int, channels: int) -> torch.Tensor:
    """Whisper's position table [length, channels]: sines then cosines (v1's default)."""
    step = math.log(10000) / (channels // 2 - 1)
    scales = torch.exp(-step * torch.arange(channels // 2))
    t = torch.arange(length)[:, None] * scales[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], 1)


class Attention(nn.Module):
    """Multi-head self-attention over the whole item (padded keys masked); q and k are each
    scaled by 64^-1/4. v2/v3 add an FSMN memory: a depthwise kernel-31 convolution of the
    values, plus the values, added after the output projection."""

    def __init__(self, cfg: S3Config):
        super().__init__()
        c = cfg.width
        self.heads = cfg.heads
        self.query = Linear(c, c)
        self.key = Linear(c, c, bias=False)
        self.value = Linear(c, c)
        self.out = Linear(c, c)
        self.fsmn_block = None if cfg.vq else nn.Conv1d(
            c, c, cfg.fsmn_kernel, groups=c, bias=False)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, keep: torch.Tensor,
                rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        """x [B, T, C]; bias [B, 1, 1, T] (0 or -1e10 on padded keys); keep [B, T, 1]."""
        b, t, c = x.shape
        q = self.query(x).view(b, t, self.heads, HEAD)
        k = self.key(x).view(b, t, self.heads, HEAD)
        v = self.value(x)
        memory = self.memory(v, keep) if self.fsmn_block is not None else None
        if rope is not None:
            q, k = rotate(q, *rope), rotate(k, *rope)
        scale = HEAD**-0.25
        q = q.permute(0, 2, 1, 3) * scale
        k = k.permute(0, 2, 1, 3) * scale
        v = v.view(b, t, self.heads, HEAD).permute(0, 2, 1, 3)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), scale=1.0)
        out = self.out(out.permute(0, 2, 1, 3).flatten(2))
        return out if memory is None else out + memory

    def memory(self, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        v = v * keep
        pad = (self.fsmn_block.kernel_size[0] - 1) // 2
        m = self.fsmn_block(F.pad(v.transpose(1, 2), (pad, pad))).transpose(1, 2)
        return (m + v) * keep


class LayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32 whatever the input's dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x.float(), self.normalized_shape, self.weight.float(),
                            self.bias.float(), self.eps).type(x.dtype)


class Block(nn.Module):
    """x + attn(LN(x)), then x + MLP(LN(x)) (MLP: 4x wide, exact GELU)."""

    def __init__(self, cfg: S3Config):
        super().__init__()
        self.attn = Attention(cfg)
        self.attn_ln = LayerNorm(cfg.width, eps=cfg.ln_eps)
        self.mlp = nn.Sequential(Linear(cfg.width, 4 * cfg.width), nn.GELU(),
                                 Linear(4 * cfg.width, cfg.width))
        self.mlp_ln = LayerNorm(cfg.width, eps=cfg.ln_eps)

    def forward(self, x, bias, keep, rope):
        x = x + self.attn(self.attn_ln(x), bias, keep, rope)
        return x + self.mlp(self.mlp_ln(x))


class Encoder(nn.Module):
    def __init__(self, cfg: S3Config):
        super().__init__()
        self.cfg = cfg
        self.conv1 = nn.Conv1d(cfg.n_mels, cfg.width, 3, stride=cfg.conv1_stride, padding=1)
        self.conv2 = nn.Conv1d(cfg.width, cfg.width, 3, stride=2, padding=1)
        if cfg.vq:  # v1: absolute positions (the files carry the table)
            self.register_buffer("positional_embedding", sinusoids(cfg.positions, cfg.width))
        else:  # v2/v3: rotary positions, the table made once (a constant in exported graphs)
            cos, sin = rope_table(ROPE_POSITIONS)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))

    def forward(self, mel: torch.Tensor, lengths: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """mel [B, n_mels, F] (zero past each length), lengths [B] -> hidden [B, T, C] and
        token lengths [B] (ceil(F / 2), or ceil(F / 4) at 25 Hz)."""
        mask = lengths_mask(lengths, mel.shape[-1])[:, None]
        x = F.gelu(self.conv1(mel * mask))
        lengths = conv_lengths(lengths, self.cfg.conv1_stride)
        x = F.gelu(self.conv2(x * lengths_mask(lengths, x.shape[-1])[:, None]))
        lengths = conv_lengths(lengths, 2)
        keep = lengths_mask(lengths, x.shape[-1])[:, :, None]
        x = x.permute(0, 2, 1)
        bias = (1.0 - keep.transpose(1, 2).to(x.dtype)) * -1.0e10
        bias = bias[:, None]
        rope = None
        if self.cfg.vq:
            x = (x + self.positional_embedding[: x.shape[1]]).to(x.dtype)
        else:
            t = x.shape[1]
            rope = self.rope_cos[:t].to(x), self.rope_sin[:t].to(x)
        for block in self.blocks:
            x = block(x, bias, keep, rope)
        return x, lengths


class Codebook(nn.Module):
    """v1: `embed` [4096, C], the nearest entry to the L2-normalised frame; v2/v3:
    `project_down` C -> 8, each digit round(0.999 tanh(h)) + 1 in {0, 1, 2}, code
    sum(digit_j 3^j)."""

    def __init__(self, cfg: S3Config):
        super().__init__()
        if cfg.vq:
            self.register_buffer("embed", torch.zeros(cfg.codebook_size, cfg.width))
        else:
            self.project_down = nn.Linear(cfg.width, 8)
        self.vq = cfg.vq

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, C] -> codes [B, T] (int64)."""
        shape = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1]).float()  # (float32 under reduced precision too)
        if self.vq:
            x = F.normalize(x, p=2, dim=-1)
            embed = self.embed.t().float()
            dist = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed
                     + embed.pow(2).sum(0, keepdim=True))
            return dist.max(dim=-1).indices.view(shape)
        h = self.project_down(x).tanh() * 0.9990000128746033
        digits = h.round() + 1
        powers = torch.pow(3, torch.arange(8, device=x.device, dtype=digits.dtype))
        return (digits * powers).sum(-1).long().view(shape)


class Quantizer(nn.Module):
    def __init__(self, cfg: S3Config):
        super().__init__()
        self._codebook = Codebook(cfg)  # (the name the released tensors carry)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._codebook(x)


class S3Model(nn.Module):
    """Log-mel [B, 128, F] with lengths -> codes [B, T] with token lengths; `token2wav`, when
    the weights have one: v2 tokens and a voice -> 24 kHz audio (token2wav/)."""

    def __init__(self, cfg: S3Config):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.quantizer = Quantizer(cfg)
        self.token2wav = None
        if cfg.token2wav is not None:
            from .token2wav.model import Token2Wav

            self.token2wav = Token2Wav(cfg.token2wav)

    def forward(self, mel: torch.Tensor, lengths: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden, lengths = self.encoder(mel, lengths)
        return self.quantizer(hidden), lengths

    def float32_islands(self) -> list[nn.Module]:
        """Kept in float32 under reduced precision: the quantizer (its search decides codes);
        with token-to-audio, the vocoder (its excitation accumulates phase over the whole
        signal) and the speaker encoder. The flow runs in the reduced dtype, its Euler state in
        float32 (token2wav/flow.py)."""
        islands: list[nn.Module] = [self.quantizer]
        if self.token2wav is not None:
            islands.append(self.token2wav.hift)
            if isinstance(self.token2wav.speaker_encoder, nn.Module):  # (not ONNX Runtime's)
                islands.append(self.token2wav.speaker_encoder)
        return islands
