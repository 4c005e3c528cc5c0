"""DistillNeuCodec's encoder: DistilHuBERT as the semantic branch and a small convolutional and
local-attention acoustic encoder; the FSQ and the decoder are NeuCodec's (models/xcodec2).

Module names follow the neucodec package's (and transformers' HubertModel for the semantic
model), so its checkpoint loads with X-Codec2's renames for the shared parts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn.hubert import Hubert
from ...nn.linear import Linear
from ..xcodec2.model import Decoder, Quantizer, SemanticAdapter
from .config import DistillNeuCodecConfig

# -- the acoustic encoder ------------------------------------------------------------------------


def trend_pool(x: torch.Tensor, kernel: int) -> torch.Tensor:
    """Moving average of the moving maximum of |x| (zero-padded average); kernel 1: x."""
    if kernel == 1:
        return x
    pad = kernel // 2
    return F.avg_pool1d(F.max_pool1d(x.abs(), kernel, 1, pad), kernel, 1, pad)


class FirstBlock(nn.Module):
    """Trend-pooled copies of the waveform, each through a k7 convolution to 4 channels; then
    1x1 convolutions (GELU between) over them and the waveform itself."""

    POOLS = (1, 5, 11, 21, 45)

    def __init__(self, dim: int):
        super().__init__()
        self.blocks = nn.ModuleList(nn.ModuleDict({"1": nn.Conv1d(1, 4, 7, padding=3)})
                                    for _ in self.POOLS)
        h = 4 * len(self.POOLS)
        self.conv_1 = nn.Conv1d(h, 4 * h, 1)
        self.conv_2 = nn.Conv1d(4 * h + 1, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.cat([b["1"](trend_pool(x, k)) for b, k in zip(self.blocks, self.POOLS,
                                                                  strict=True)], 1)
        return self.conv_2(torch.cat([F.gelu(self.conv_1(h)), x], 1))


class ConvUnit(nn.Module):
    """x + pw2(GRN(snake(pw1(depthwise(x))))), the middle channels-last."""

    def __init__(self, dim: int):
        super().__init__()
        self.dw_conv = nn.Conv1d(dim, dim, 7, padding=3, groups=dim)
        self.pw_conv1 = Linear(dim, 4 * dim)
        self.act = nn.Module()
        self.act.alpha = nn.Parameter(torch.ones(1, 1, 4 * dim))
        self.grn = nn.Module()
        self.grn.gamma = nn.Parameter(torch.zeros(1, 4 * dim))
        self.grn.beta = nn.Parameter(torch.zeros(1, 4 * dim))

        self.pw_conv2 = Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pw_conv1(self.dw_conv(x).transpose(1, 2))
        alpha = self.act.alpha
        y = y + (alpha + 1.1920928955078125e-07).reciprocal() * torch.sin(alpha * y).pow(2)
        g = torch.linalg.vector_norm(y, dim=(1, 2), keepdim=True)  # one norm per item
        eps = torch.finfo(torch.float32).eps
        y = self.grn.gamma * (y * (g / (g + eps))) + self.grn.beta + y
        return x + self.pw_conv2(y).transpose(1, 2)


class Residual(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.module = ConvUnit(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


def local_attention_masks(mlp: nn.Sequential, window: int) -> torch.Tensor:
    """Additive masks [2, heads, W, 2W] of query i (at W + i) and key j (the window before, then
    the query's own): the MLP of their distance where the query sees the key, -inf where it does
    not (a later key; [0], the first window's: every key of the window before, none)."""
    table = mlp(torch.arange(2 * window, dtype=torch.float, device=mlp[0].weight.device)[:, None])
    i = torch.arange(window, 2 * window, device=table.device)[:, None]
    j = torch.arange(2 * window, device=table.device)[None, :]
    bias = table[(i - j).abs()].permute(2, 0, 1)
    later = bias.masked_fill(j > i, float("-inf"))
    return torch.stack([later.masked_fill(j < window, float("-inf")), later])


class LocalAttention(nn.Module):
    """Block-causal local attention: the sequence in windows of W steps; a query sees the keys
    of its own window and the one before, up to itself; a bias per head and distance. Each
    window attends as one batch row of scaled_dot_product_attention (its fused kernel, without
    the [W, 2W] scores in memory), the first window with its own mask."""

    def __init__(self, dim: int, heads: int, head_dim: int, window: int):
        super().__init__()
        self.heads, self.window = heads, window
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = Linear(dim, 3 * heads * head_dim, bias=False)
        self.to_out = Linear(heads * head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        w, h = self.window, self.heads
        n = (t + w - 1) // w * w  # (not -(-t // w): ONNX divides integers towards zero)
        windows = n // w
        # [B, windows, H, W, d]
        q, k, v = (F.pad(z, (0, 0, 0, n - t)).view(b, windows, w, h, -1).transpose(2, 3)
                   for z in self.to_qkv(self.norm(x)).chunk(3, -1))
        d = q.shape[-1]
        q = q * d ** -0.5
        # [B, windows, H, 2W, d]: the window before (zeros before the first), then this one
        k, v = (torch.cat([F.pad(z, (0, 0, 0, 0, 0, 0, 1, 0))[:, :-1], z], 3) for z in (k, v))

        def attend(start: int, count, mask: torch.Tensor) -> torch.Tensor:
            """Windows start..start + count as rows of one batch."""
            qs, ks, vs = (z[:, start: start + count].reshape(b * count, h, z.shape[3], d)
                          for z in (q, k, v))
            y = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=1.0)
            return y.view(b, count, h, w, d)

        # masks [1, H, W, 2W]: 4-D, as the fused CPU kernel takes them (3-D ones: the plain one)
        y = torch.cat([attend(0, 1, masks[0:1]), attend(1, windows - 1, masks[1:2])], 1)
        y = y.transpose(2, 3).reshape(b, n, -1)[:, :t]
        return self.to_out(y)


class FeedForward(nn.Sequential):
    """LayerNorm, Linear to 2 x hidden, GEGLU, Linear back (the package's indices 0, 1, 4)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__(nn.LayerNorm(dim), Linear(dim, 2 * hidden, bias=False),
                         nn.Identity(), nn.Identity(), Linear(hidden, dim, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, gate = self[1](self[0](x)).chunk(2, -1)
        return self[4](h * F.gelu(gate))


class LocalTrans(nn.Module):
    def __init__(self, dim: int, depth: int, window: int, heads: int = 6):
        super().__init__()
        self.window = window
        self.dynamic_pos_bias = nn.Module()
        self.dynamic_pos_bias.mlp = nn.Sequential(
            Linear(1, dim // 2), nn.SiLU(), Linear(dim // 2, dim // 2), nn.SiLU(),
            Linear(dim // 2, heads))
        self.layers = nn.ModuleList(
            nn.ModuleList([LocalAttention(dim, heads, dim // 4, window),
                           FeedForward(dim, int(dim * 4 * 2 / 3))]) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        masks = local_attention_masks(self.dynamic_pos_bias.mlp, self.window)
        for attn, ff in self.layers:
            x = attn(x, masks) + x
            x = ff(x) + x
        return x


class DownTrans(nn.Module):
    def __init__(self, dim: int, window: int, rate: int):
        super().__init__()
        self.trans = LocalTrans(dim, 2, window)
        self.down_layer = nn.Conv1d(dim, dim, rate, stride=rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_layer(self.trans(x).transpose(1, 2)).transpose(1, 2)


class LocalEncoder(nn.Module):
    """Local attention at the convolutions' rate, a strided convolution, local attention."""

    def __init__(self, cfg: DistillNeuCodecConfig):
        super().__init__()
        dim, rate = cfg.acoustic_dim, cfg.acoustic_compress
        self.down_trans = DownTrans(dim, cfg.acoustic_window * rate, rate)
        self.local_trans = LocalTrans(dim, cfg.acoustic_depth - 2, cfg.acoustic_window)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.local_trans(self.down_trans(x.transpose(1, 2)))


class ConvEncoder(nn.Module):
    """FirstBlock, then units and stride-4 convolutions: 16 kHz -> 250 Hz."""

    def __init__(self, cfg: DistillNeuCodecConfig):
        super().__init__()
        dims = cfg.acoustic_dims
        blocks: list[nn.Module] = [FirstBlock(dims[0])]
        for c_in, c_out in zip(dims[:-1], dims[1:], strict=False):
            blocks += [nn.Sequential(Residual(c_in)),
                       nn.Sequential(nn.Conv1d(c_in, c_out, 4, stride=4))]
        blocks += [nn.Sequential(Residual(dims[-1]), Residual(dims[-1])),
                   nn.Conv1d(dims[-1], cfg.acoustic_dim, 3, padding=1)]
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class DistillAcousticEncoder(nn.Module):
    def __init__(self, cfg: DistillNeuCodecConfig):
        super().__init__()
        self.encoder = ConvEncoder(cfg)
        self.en_encoder = LocalEncoder(cfg)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """[B, 1, P] -> [B, P / 320, acoustic_dim]."""
        return self.en_encoder(self.encoder(audio))


# -- the codec -----------------------------------------------------------------------------------


class DistillNeuCodecModel(nn.Module):
    def __init__(self, cfg: DistillNeuCodecConfig):
        super().__init__()
        self.config = cfg
        self.semantic_encoder = Hubert(cfg.hubert)
        self.semantic_adapter = SemanticAdapter(cfg.hubert_hidden_size, cfg.adapter_size)
        self.codec_encoder = DistillAcousticEncoder(cfg)
        self.fc_sq_prior = Linear(cfg.acoustic_dim, cfg.hubert_hidden_size)
        self.fc_encoder = Linear(2 * cfg.hubert_hidden_size, cfg.quantization_dim)
        self.quantizer = Quantizer(cfg)
        self.acoustic_decoder = Decoder(cfg)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Indices [B, T] for audio [B, 1, P] (P a multiple of 320, items of that length):
        T = P / 320."""
        half = self.config.hop_length // 2
        semantic = self.semantic_encoder(F.pad(audio[:, 0], (half, half)))
        semantic = self.semantic_adapter(semantic.transpose(1, 2), None)
        acoustic = self.fc_sq_prior(self.codec_encoder(audio)).transpose(1, 2)
        t = min(semantic.shape[-1], acoustic.shape[-1])
        fused = torch.cat([semantic[..., :t], acoustic[..., :t]], 1).transpose(1, 2)
        return self.quantizer.encode(self.fc_encoder(fused))

    def decode(self, indices: torch.Tensor, frames: torch.Tensor | None = None) -> torch.Tensor:
        return self.acoustic_decoder(self.quantizer.decode(indices), frames)

    def float32_islands(self) -> list[nn.Module]:
        return [self.quantizer, self.acoustic_decoder.head]
