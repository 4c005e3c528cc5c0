"""X-Codec2: semantic (Wav2Vec2-BERT) and acoustic (anti-aliased SnakeBeta convs) encoders fused
into one FSQ token per 320 samples; a Vocos-style transformer decoder with an iSTFT head.

Module names follow transformers' Xcodec2Model, so the state dict is the xcodec2-hf layout.
Every method takes optional per-item lengths: with them, each item of a zero-padded batch is
processed exactly as if alone (its own edge padding, attention and norms over its own frames).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.activations import SnakeBeta
from ...nn.alias_free import AntiAliasedActivation
from ...nn.fsq import FSQ
from ...nn.istft import ISTFTHead
from ...nn.kernels import full_attention
from ...nn.linear import Linear
from ...nn.masking import time_mask, zero_tail
from ...nn.precision import param_dtype, run_in
from ...nn.tracing import exporting
from ...nn.transformer import RMSNorm
from ...nn.windows import map_windows
from .config import XCodec2Config
from .features import mel_filters, semantic_features
from .semantic import SemanticEncoder

# -- acoustic encoder ---------------------------------------------------------------------------


def aa_snake(channels: int) -> AntiAliasedActivation:
    return AntiAliasedActivation(SnakeBeta(channels))


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.snake1 = aa_snake(dim)
        self.conv1 = nn.Conv1d(dim, dim, 7, dilation=dilation, padding=3 * dilation)
        self.snake2 = aa_snake(dim)
        self.conv2 = nn.Conv1d(dim, dim, 1)
        self.radius = self.snake1.radius + 3 * dilation + self.snake2.radius  # steps each side

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        y = self.conv1(zero_tail(self.snake1(x, lengths), lengths))
        return x + self.conv2(self.snake2(y, lengths))


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, stride: int):
        super().__init__()
        self.res_unit1 = ResidualUnit(dim // 2, 1)
        self.res_unit2 = ResidualUnit(dim // 2, 3)
        self.res_unit3 = ResidualUnit(dim // 2, 9)
        self.snake1 = aa_snake(dim // 2)
        padding = math.ceil(stride / 2)
        self.conv1 = nn.Conv1d(dim // 2, dim, 2 * stride, stride=stride, padding=padding)
        self.stride = stride
        units = (self.res_unit1, self.res_unit2, self.res_unit3)
        # output m reads conv inputs m * stride - padding .. m * stride - padding + 2 stride - 1
        self.radius = (sum(u.radius for u in units) + self.snake1.radius
                       + max(padding, 2 * stride - 1 - padding))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        for unit in (self.res_unit1, self.res_unit2, self.res_unit3):
            x = unit(x, lengths)
        return self.conv1(zero_tail(self.snake1(x, lengths), lengths))


class AcousticEncoder(nn.Module):
    """Audio [B, 1, P] -> [B, hidden, P / hop].

    The blocks run over time windows of about `window_elements` values per tensor
    (nn/windows.py): the same result as whole-signal passes, faster on the CPU for long inputs
    (docs/performance.md)."""

    window_elements = 2**20

    def __init__(self, cfg: XCodec2Config):
        super().__init__()
        c = cfg.encoder_hidden_size
        self.conv1 = nn.Conv1d(1, c, 7, padding=3)
        self.block = nn.ModuleList(
            EncoderBlock(c * 2 ** (i + 1), s) for i, s in enumerate(cfg.downsampling_ratios))
        top = c * 2 ** len(cfg.downsampling_ratios)
        self.snake1 = aa_snake(top)
        self.conv2 = nn.Conv1d(top, cfg.hidden_size, 3, padding=1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        first = self.block[0]

        def stem(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
            x = run_in(self.conv1, zero_tail(x, lengths))  # a float32 island under bf16/fp16
            return first(x.to(param_dtype(self.conv2)), lengths)

        stem_radius = first.radius + self.conv1.padding[0]  # conv1: kernel 7, padding 3
        stages = [(stem, first.stride, stem_radius, first.conv1.in_channels)]
        stages += [(b, b.stride, b.radius, b.conv1.in_channels) for b in self.block[1:]]
        for fn, stride, radius, channels in stages:
            # about window_elements values per tensor, but at least 8 halos of output
            if exporting():  # one whole-signal pass: the length is symbolic
                x = fn(x, lengths)
            else:
                window = max(self.window_elements // (channels * x.shape[0]), 8 * radius)
                x = map_windows(fn, x, lengths, stride=stride, radius=radius, window=window)
            lengths = None if lengths is None else lengths // stride
        return self.conv2(zero_tail(self.snake1(x, lengths), lengths))


class SemanticAdapter(nn.Module):
    """Four k3 convs (dim -> hidden -> hidden -> hidden -> dim); the ReLU'd first output is the
    residual of the middle pair."""

    def __init__(self, dim: int, hidden: int | None = None):
        super().__init__()
        hidden = hidden or dim
        self.conv1 = nn.Conv1d(dim, hidden, 3, padding=1, bias=False)
        self.conv2 = nn.Conv1d(hidden, hidden, 3, padding=1)
        self.conv3 = nn.Conv1d(hidden, hidden, 3, padding=1)
        self.conv4 = nn.Conv1d(hidden, dim, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        h = F.relu(self.conv1(zero_tail(x, lengths)))
        y = self.conv3(zero_tail(F.relu(self.conv2(zero_tail(h, lengths))), lengths)) + h
        return self.conv4(zero_tail(y, lengths))


class Quantizer(nn.Module):
    def __init__(self, cfg: XCodec2Config):
        super().__init__()
        # (F.linear, the references' call: its rounding feeds the FSQ rounding, and it is small)
        self.project_in = nn.Linear(cfg.quantization_dim, len(cfg.quantization_levels))
        self.project_out = nn.Linear(len(cfg.quantization_levels), cfg.quantization_dim)
        self.fsq = FSQ(cfg.quantization_levels)

    def encode(self, h: torch.Tensor) -> torch.Tensor:
        """Indices [B, T] for fused features h [B, T, C]; bound applied twice, as trained."""
        return self.fsq.indices(self.fsq.bound(run_in(self.project_in, h)))

    def decode(self, indices: torch.Tensor) -> torch.Tensor:
        return self.project_out(self.fsq.codes(indices).to(self.project_out.weight.dtype))


# -- decoder ------------------------------------------------------------------------------------


class ResNetBlock(nn.Module):
    """x + conv2(SiLU(GN(conv1(SiLU(GN(x)))))), channels-last in and out."""

    def __init__(self, dim: int, groups: int = 32):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, dim, eps=1e-6)
        self.conv1 = nn.Conv1d(dim, dim, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, dim, eps=1e-6)
        self.conv2 = nn.Conv1d(dim, dim, 3, padding=1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        h = x.transpose(1, 2)
        y = self.conv1(zero_tail(F.silu(group_norm(self.norm1, h, lengths)), lengths))
        y = self.conv2(zero_tail(F.silu(group_norm(self.norm2, y, lengths)), lengths))
        return y.add_(h).transpose(1, 2)


def group_norm(norm: nn.GroupNorm, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    """GroupNorm of x [B, C, T] whose statistics cover only each item's first lengths[b] steps."""
    if lengths is None:
        return norm(x)
    b, c, t = x.shape
    g = norm.num_groups
    keep = time_mask(lengths.to(x.device), t)[:, None, None, :].float()  # [B, 1, 1, T]
    xg = x.float().reshape(b, g, c // g, t)  # statistics in float32
    count = keep.sum(-1, keepdim=True) * (c // g)
    mean = (xg * keep).sum((-2, -1), keepdim=True) / count
    var = (((xg - mean) * keep) ** 2).sum((-2, -1), keepdim=True) / count
    y = ((xg - mean) * torch.rsqrt(var + norm.eps)).reshape(b, c, t).to(x.dtype)
    return y * norm.weight[None, :, None] + norm.bias[None, :, None]


class Attention(nn.Module):
    """Full (non-causal) attention. The original rotates q and k by RoPE with the *head index*
    as position (a quirk): one rotation of both, which leaves every q.k as it is, so it is left
    out here (decoded audio within 1e-7 of the rotated form; the rotation's 4 products and 2
    concatenations over [B, heads, T, head_dim] were 10 % of a 60 s decode's profile)."""

    def __init__(self, cfg: XCodec2Config):
        super().__init__()
        dim, self.heads, self.head_dim = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
        inner = self.heads * self.head_dim
        self.q_proj = Linear(dim, inner, bias=False)
        self.k_proj = Linear(dim, inner, bias=False)
        self.v_proj = Linear(dim, inner, bias=False)
        self.o_proj = Linear(inner, dim, bias=False)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        b, t, _ = x.shape
        shape = (b, t, self.heads, self.head_dim)
        q, k, v = (proj(x).view(shape).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        y = full_attention(q, k, v, key_mask)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = Linear(dim, hidden, bias=False)
        self.fc2 = Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(x), inplace=not torch.is_grad_enabled()))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: XCodec2Config):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        # each sum into the fresh output of its branch (y + x is x + y, bit for bit)
        x = self.self_attn(self.input_layernorm(x), key_mask).add_(x)
        return self.mlp(self.post_attention_layernorm(x)).add_(x)


class Decoder(nn.Module):
    """Latents [B, T, quantization_dim] -> audio [B, 1, decoder_hop * T]."""

    def __init__(self, cfg: XCodec2Config):
        super().__init__()
        dim = cfg.hidden_size
        self.fc = Linear(cfg.quantization_dim, dim)
        self.embed = nn.Conv1d(dim, dim, 7, padding=3)
        self.prior_net = nn.ModuleList([ResNetBlock(dim), ResNetBlock(dim)])
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.post_net = nn.ModuleList([ResNetBlock(dim), ResNetBlock(dim)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = ISTFTHead(dim, cfg.n_fft, cfg.decoder_hop)

    def forward(self, latents: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        x = run_in(self.fc, latents).transpose(1, 2)
        x = self.embed(zero_tail(x, lengths)).transpose(1, 2)
        for block in self.prior_net:
            x = block(x, lengths)
        key_mask = None if lengths is None else time_mask(lengths.to(x.device), x.shape[1])
        for layer in self.layers:
            x = layer(x, key_mask)
        for block in self.post_net:
            x = block(x, lengths)
        return self.head(self.norm(x).float(), lengths)  # the head is a float32 island


# -- the codec ----------------------------------------------------------------------------------


class XCodec2Model(nn.Module):
    def __init__(self, cfg: XCodec2Config):
        super().__init__()
        self.config = cfg
        self.semantic_encoder = SemanticEncoder(cfg.semantic)
        self.semantic_adapter = SemanticAdapter(cfg.semantic.hidden_size)
        self.acoustic_encoder = AcousticEncoder(cfg)
        self.fc_encoder = Linear(cfg.quantization_dim, cfg.quantization_dim)
        self.quantizer = Quantizer(cfg)
        self.acoustic_decoder = Decoder(cfg)
        # float64 on the CPU, also when the model is built on the meta device (checkpoint.py),
        # and not a buffer: a dtype cast of the model must not round it
        with torch.device("cpu"):
            self.mel_filters = mel_filters(cfg.sampling_rate)

    def features(self, audio: torch.Tensor, lengths: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Semantic input features and their valid-frame mask (see `encode`)."""
        cfg = self.config
        full = torch.full((audio.shape[0],), audio.shape[-1], device=audio.device)
        return semantic_features(audio[:, 0], full if lengths is None else lengths,
                                 cfg.hop_length, cfg.sampling_rate, cfg.semantic_centre,
                                 self.mel_filters)

    def encode(self, audio: torch.Tensor, lengths: torch.Tensor | None = None,
               features: torch.Tensor | None = None, mask: torch.Tensor | None = None
               ) -> torch.Tensor:
        """Indices [B, T] for audio [B, 1, P] padded as the codec wants (P multiple of hop):
        T = P / hop, or one frame fewer without semantic_centre (the semantic features then
        end a frame early and the last acoustic frame is dropped, as NeuCodec does).
        `lengths`: padded samples per item (multiples of hop) when items differ in length.
        `features`, `mask`: this audio's semantic features and, with lengths, their valid-frame
        mask, computed beforehand (a window of a longer signal uses the slice of the whole
        signal's features)."""
        hop = self.config.hop_length
        if features is None:
            features, mask = self.features(audio, lengths)
        frames = None if lengths is None else lengths // hop
        if frames is not None and not self.config.semantic_centre:
            frames = frames - 1
        semantic = self.semantic_encoder(features.to(param_dtype(self.semantic_encoder)),
                                         None if lengths is None else mask)
        semantic = self.semantic_adapter(semantic.transpose(1, 2), frames)
        acoustic = self.acoustic_encoder(audio, lengths)
        t = min(semantic.shape[-1], acoustic.shape[-1])
        semantic, acoustic = semantic[..., :t], acoustic[..., :t]
        fused = self.fc_encoder(torch.cat([semantic, acoustic], dim=1).transpose(1, 2))
        return self.quantizer.encode(fused)

    def decode(self, indices: torch.Tensor, frames: torch.Tensor | None = None) -> torch.Tensor:
        """Audio [B, 1, decoder_hop * T] for indices [B, T]; `frames`: valid frames per item."""
        return self.acoustic_decoder(self.quantizer.decode(indices), frames)

    def float32_islands(self) -> list[nn.Module]:
        """Modules kept in float32 under reduced precision (see nn/precision.py)."""
        return [self.acoustic_encoder.conv1, self.quantizer, self.acoustic_decoder.head]
