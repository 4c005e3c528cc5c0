"""SEANet: the convolutional encoder and decoder of Meta's neural codec (residual blocks with a
1x1 shortcut, ELU, strided convolutions, a 2-layer LSTM), and its residual VQ with Euclidean
codebooks. Convolutions pad as the reference's SConv1d: the total padding (kernel - stride) on
the left for a causal model (split for a non-causal one), plus what completes the last window on
the right, all by reflection (an input shorter than the padding is zero-extended first, as its
pad1d does).

Module names are the reference's (`model.N.conv.conv`, `model.N.convtr.convtr`) with weight norm
folded; the codebooks are one buffer, `embed` [n_q, bins, dim]. `cfg` is a SEANetConfig (or a
family's config that extends it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .conv import Conv1d, ConvTranspose1d
from .kernels import derived, group_norm, reflect_pad, rule_product
from .tracing import exporting


@dataclass(frozen=True)
class SEANetConfig:
    """The SEANet encoder's and decoder's arguments, with the reference's defaults (a family's
    config extends it with its own fields, or overrides a default by declaring it again)."""

    channels: int = 1
    n_filters: int = 32
    ratios: tuple[int, ...] = (8, 5, 4, 2)  # the decoder's order; the encoder's is reversed
    dimension: int = 128
    causal: bool = True
    norm: str = "weight_norm"  # or "time_group_norm" (GroupNorm(1, C) after each convolution)
    lstm: int = 2
    kernel_size: int = 7
    last_kernel_size: int = 7
    residual_kernel_size: int = 3
    dilation_base: int = 2
    n_residual_layers: int = 1
    compress: int = 2
    true_skip: bool = False  # False: a 1x1 convolution as the residual blocks' shortcut
    trim_right_ratio: float = 1.0

    def __post_init__(self):
        if self.norm not in ("weight_norm", "time_group_norm"):
            raise ConfigError(f"norm must be weight_norm or time_group_norm, got {self.norm!r}")
        if self.causal and self.norm == "time_group_norm":
            raise ConfigError("GroupNorm over time is not causal")
        if self.channels not in (1, 2):
            raise ConfigError(f"channels must be 1 or 2, got {self.channels}")

    @property
    def hop_length(self) -> int:
        return math.prod(self.ratios)


class _Norm(nn.Module):
    """A convolution (named `name`: the package's `conv` or `convtr`) and the normalisation
    after it (GroupNorm over time, or none)."""

    def __init__(self, conv: nn.Module, channels: int, group_norm: bool, name: str = "conv"):
        super().__init__()
        self.name = name
        setattr(self, name, conv)
        self.norm = nn.GroupNorm(1, channels) if group_norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = getattr(self, self.name)(x)
        return group_norm(y, self.norm) if isinstance(self.norm, nn.GroupNorm) else self.norm(y)


class SConv1d(nn.Module):
    """`conv`: nn.Conv1d (the reference's kernels, bit for bit: the encoder, whose latents
    decide the codes) or nn.conv.Conv1d (channels-last where faster: the decoder)."""

    def __init__(self, cfg: SEANetConfig, cin: int, cout: int, kernel: int, stride: int = 1,
                 dilation: int = 1, conv: type = nn.Conv1d):
        super().__init__()
        self.conv = _Norm(conv(cin, cout, kernel, stride, dilation=dilation), cout,
                          cfg.norm == "time_group_norm")
        self.causal = cfg.causal
        self.total = (kernel - 1) * dilation - (stride - 1)
        self.kernel, self.stride = (kernel - 1) * dilation + 1, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # what completes the last window: (ceil((L - k + total) / s + 1) - 1) s + k - total - L,
        # which is (-L) mod s since k - total = s
        extra = -x.shape[-1] % self.stride
        if self.causal:
            x = reflect_pad(x, self.total, extra)
        else:
            right = self.total // 2
            x = reflect_pad(x, self.total - right, right + extra)
        return self.conv(x)


class SConvTranspose1d(nn.Module):
    def __init__(self, cfg: SEANetConfig, cin: int, cout: int, stride: int):
        super().__init__()
        self.convtr = _Norm(ConvTranspose1d(cin, cout, 2 * stride, stride), cout,
                            cfg.norm == "time_group_norm", "convtr")
        total = stride  # kernel - stride
        if cfg.causal:
            self.right = math.ceil(total * cfg.trim_right_ratio)
        else:
            self.right = total // 2
        self.left = total - self.right

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.convtr(x)
        return y[..., self.left : y.shape[-1] - self.right]


class ResnetBlock(nn.Module):
    """shortcut(x) + conv_1(ELU(conv_k,dilated(ELU(x)))), hidden width dim / compress."""

    def __init__(self, cfg: SEANetConfig, dim: int, dilation: int, conv: type):
        super().__init__()
        hidden = dim // cfg.compress
        self.block = nn.Sequential(nn.ELU(), SConv1d(cfg, dim, hidden, cfg.residual_kernel_size,
                                                     dilation=dilation, conv=conv),
                                   nn.ELU(inplace=True), SConv1d(cfg, hidden, dim, 1, conv=conv))
        self.shortcut = nn.Identity() if cfg.true_skip else SConv1d(cfg, dim, dim, 1, conv=conv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.shortcut, nn.Identity):  # (x + y == y + x, bit for bit)
            return self.block(x).add_(x)
        skip = self.shortcut(x)  # (then x is not needed again: the block's ELU runs in place,
        # but not in a graph, where x may be a view: that would scatter it into its base)
        return skip.add_(self.block[1:](F.elu(x, inplace=not exporting())))


class SLSTM(nn.Module):
    """A multi-layer LSTM over time (zero initial state) plus its input."""

    def __init__(self, dim: int, layers: int):
        super().__init__()
        self.lstm = nn.LSTM(dim, dim, layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(2, 0, 1)
        y = _onnx_lstm(self.lstm, x) if exporting() else self.lstm(x)[0]
        return (y + x).permute(1, 2, 0)

    def forward_many(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        """forward(x) of each x [B, C, t_x], as one batch: each zero-padded at its end to the
        longest (an LSTM's earlier steps do not see later ones), each out channels-last: the
        recurrence reads its weights once a step for all rows (docs/codecs/encodec.md). The
        sums round as a batch's (within 3e-7 of one call's)."""
        b, c = xs[0].shape[:2]
        seq = xs[0].new_zeros(max(x.shape[-1] for x in xs), b * len(xs), c)
        for i, x in enumerate(xs):
            seq[: x.shape[-1], i * b : (i + 1) * b] = x.permute(2, 0, 1)
        y = self.lstm(seq)[0].add_(seq)
        return [y[: x.shape[-1], i * b : (i + 1) * b].transpose(0, 1).contiguous().transpose(1, 2)
                for i, x in enumerate(xs)]


def _onnx_lstm(lstm: nn.LSTM, x: torch.Tensor) -> torch.Tensor:
    """nn.LSTM (zero initial state, batch second) as ONNX LSTM nodes, one per layer: torch's
    exporter does not take nn.LSTM over a symbolic number of steps. ONNX orders the gates
    input, output, forget, cell; torch input, forget, cell, output."""
    hidden, gates = lstm.hidden_size, [0, 3, 1, 2]
    for layer in range(lstm.num_layers):
        w, r = (getattr(lstm, f"weight_{n}_l{layer}").reshape(4, hidden, -1)[gates]
                .reshape(1, 4 * hidden, -1) for n in ("ih", "hh"))
        b = torch.cat([getattr(lstm, f"bias_{n}_l{layer}").reshape(4, hidden)[gates]
                       for n in ("ih", "hh")]).reshape(1, 8 * hidden)
        y = torch.onnx.ops.symbolic("LSTM", (x, w, r, b), {"hidden_size": hidden},
                                    dtype=x.dtype, shape=[x.shape[0], 1, x.shape[1], hidden],
                                    version=14)
        x = y[:, 0]
    return x


def _residuals(cfg: SEANetConfig, dim: int, conv: type) -> list[nn.Module]:
    return [ResnetBlock(cfg, dim, cfg.dilation_base ** j, conv)
            for j in range(cfg.n_residual_layers)]


class Encoder(nn.Module):
    def __init__(self, cfg: SEANetConfig):
        super().__init__()
        dim = cfg.n_filters
        layers: list[nn.Module] = [SConv1d(cfg, cfg.channels, dim, cfg.kernel_size)]
        for ratio in reversed(cfg.ratios):
            layers += [*_residuals(cfg, dim, nn.Conv1d), nn.ELU(inplace=True),
                       SConv1d(cfg, dim, 2 * dim, 2 * ratio, stride=ratio)]
            dim *= 2
        if cfg.lstm:
            layers.append(SLSTM(dim, cfg.lstm))
        layers += [nn.ELU(inplace=True), SConv1d(cfg, dim, cfg.dimension, cfg.last_kernel_size)]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class Decoder(nn.Module):
    def __init__(self, cfg: SEANetConfig):
        super().__init__()
        dim = cfg.n_filters * 2 ** len(cfg.ratios)
        layers: list[nn.Module] = [SConv1d(cfg, cfg.dimension, dim, cfg.kernel_size, conv=Conv1d)]
        if cfg.lstm:
            layers.append(SLSTM(dim, cfg.lstm))
        for ratio in cfg.ratios:
            layers += [nn.ELU(inplace=True), SConvTranspose1d(cfg, dim, dim // 2, ratio),
                       *_residuals(cfg, dim // 2, Conv1d)]
            dim //= 2
        layers += [nn.ELU(inplace=True),
                   SConv1d(cfg, cfg.n_filters, cfg.channels, cfg.last_kernel_size, conv=Conv1d)]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def forward_many(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        """forward(x) of each x (the 48 kHz model's segments), the LSTM run once over them all
        (SLSTM.forward_many); the other layers run on each alone (as one batch they were
        slower: a segment's activations fill the caches)."""
        head, lstm, tail = self.model[0], self.model[1], self.model[2:]
        if len(xs) < 2 or not isinstance(lstm, SLSTM):
            return [self(x) for x in xs]
        return [tail(y) for y in lstm.forward_many([head(x) for x in xs])]


class EuclideanResidualVQ(nn.Module):
    """Euclidean residual VQ: the nearest row by -(|x|^2 - 2 x.e + |e|^2) (the package's
    expression, whose rounding decides near-ties), its raw row subtracted from the residual.
    The expression's terms are summed in place in the product's buffer, in the package's
    order ((-p) + a is a - p exactly; the first of equal minima of a value is the first of
    equal maxima of its negation), without the package's four [frames, bins] temporaries.
    The product is the kernel rules' where `rule_product` (kernels.rule_product: under the
    oneDNN rule oneDNN's, which at width 128 sums as MKL does; docs/codecs/encodec.md), else
    torch's own matmul, as the reference calls it.

    width: codebooks `dim` wide searched for latents `width` wide (Higgs Audio's): each stage
    projects the residual in (a Linear width -> dim), and its row back out (dim -> width)."""

    def __init__(self, n_q: int, bins: int, dim: int, rule_product: bool = True,
                 width: int | None = None):
        super().__init__()
        self.register_buffer("embed", torch.zeros(n_q, bins, dim))
        self.rule_product = rule_product
        self.project_in = self.project_out = None
        if width is not None:
            self.project_in = nn.ModuleList(nn.Linear(width, dim) for _ in range(n_q))
            self.project_out = nn.ModuleList(nn.Linear(dim, width) for _ in range(n_q))

    def encode(self, x: torch.Tensor, levels: int) -> torch.Tensor:
        """Codes [B, levels, T] of latents x [B, D, T]."""
        b, d, t = x.shape
        residual, codes = x.transpose(1, 2).reshape(b * t, d), []  # [B T, D] throughout
        # each codebook's squared norms, the package's expression, made once per state of the
        # codebooks (kernels.derivations)
        norms = derived(self.embed, "squared norms",
                        lambda e: torch.stack([c.t().pow(2).sum(0) for c in e]))
        for i, (embed, norm) in enumerate(zip(self.embed[:levels], norms, strict=False)):
            z = residual if self.project_in is None else self.project_in[i](residual)
            dist = (_doubled_products(z, embed) if self.rule_product
                    else (2 * z) @ embed.t()).neg_()
            dist.add_(z.pow(2).sum(1, keepdim=True)).add_(norm)
            index = dist.min(dim=-1).indices  # dist here: the package's, negated
            residual = residual - self._row(i, F.embedding(index, embed))
            codes.append(index.view(b, t))
        return torch.stack(codes, 1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Latents [B, D, T] of codes [B, k, T] (the first k codebooks)."""
        out = torch.tensor(0.0, device=codes.device)
        for i in range(codes.shape[1]):
            out = out + self._row(i, F.embedding(codes[:, i], self.embed[i])).transpose(1, 2)
        return out

    def _row(self, i: int, rows: torch.Tensor) -> torch.Tensor:
        return rows if self.project_out is None else self.project_out[i](rows)


def _doubled_products(x: torch.Tensor, embed: torch.Tensor) -> torch.Tensor:
    """2 x @ embed^T, as the package computes it: (2 x) @ embed^T."""
    doubled = 2 * x
    return rule_product(doubled, embed, lambda: doubled @ embed.t())


def reach(layers: nn.Module) -> int:
    """Input samples each side that an output frame of `layers` (convolutions and pointwise
    layers, no LSTM) reads: the receptive field, an upper bound for either side."""
    field, jump = 1, 1
    for m in layers.modules():
        if isinstance(m, SConv1d):
            field += (m.kernel - 1) * jump
            jump *= m.stride
    return field


def latents_in_windows(encoder: Encoder, audio: torch.Tensor, window: int) -> torch.Tensor:
    """encoder(audio) [B, D, T] of a non-causal encoder for audio [B, C, N] (the encoder's
    dtype), its convolutions up to the LSTM run window by window: `window` samples (a multiple
    of the hop) of frames a call, each window's audio widened on both sides by the
    convolutions' reach and its edge frames dropped; then the LSTM and the layers after it on
    the whole. A window's activations stay in the caches from layer to layer, where one pass
    streams every layer's input and output through memory.

    Windows start at multiples of the hop, so each layer's frames line up with the one pass's,
    and every layer pads the audio's real ends (reflection and the extra padding of a strided
    layer) as the one pass does: the kept frames are the one pass's sums over the same values
    wherever the convolution kernels sum a window the same way whatever the input's length."""
    layers = encoder.model
    hop = math.prod(m.stride for m in layers.modules() if isinstance(m, SConv1d))
    split = next(i for i, m in enumerate(layers) if isinstance(m, SLSTM))
    head = layers[:split]
    margin = -(-reach(head) // hop) * hop
    n = audio.shape[-1]
    # the last window takes the rest (1 to 2 windows): no short call, whose kernels may sum
    # another way
    starts = [*range(0, max(n - window, 1), window)]
    ends = [*starts[1:], n]
    out = []
    for start, end in zip(starts, ends, strict=True):
        lo, hi = max(start - margin, 0), min(end + margin, n)
        y = head(audio[..., lo:hi])
        skip = (start - lo) // hop
        out.append(y[..., skip : skip + -(-(end - start) // hop)])
    return layers[split:](torch.cat(out, -1))
