"""HuBERT, wav2vec 2.0 and WavLM (transformers' HubertModel / Wav2Vec2Model / WavLMModel): raw
16 kHz audio -> hidden states at 50 Hz. Two layouts: a group-norm feature encoder and post-norm
layers (HuBERT-base, DistilHuBERT, WavLM-base-plus), or `stable_layer_norm` (wav2vec2-large and
XLSR-53: a LayerNorm after every feature convolution, pre-norm layers, the encoder's LayerNorm
at the end). WavLM adds a relative position bias to every layer's attention scores (bucketed
key - query offsets, an embedding the first layer holds), scaled per query and head by a gate
of the attention's input. Module names are transformers', so its state dicts load as they are
(the positional convolution's weight norm folded by `fold_positional_conv`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .conv import Conv1d
from .kernels import full_attention
from .linear import Linear


@dataclass(frozen=True)
class HubertConfig:
    """The sizes of a HuBERT; the defaults are HuBERT-base's."""

    conv_dims: tuple[int, ...] = (512,) * 7
    conv_kernels: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_strides: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    hidden_size: int = 768
    heads: int = 12
    intermediate_size: int = 3072
    layers: int = 12
    pos_conv_kernel: int = 128
    pos_conv_groups: int = 16
    layer_norm_eps: float = 1e-5
    projection_norm: bool = True  # a LayerNorm before the feature projection (not DistilHuBERT)
    # wav2vec2-large's layout: every feature convolution with a bias and a LayerNorm, pre-norm
    # layers, the encoder's LayerNorm after the last layer
    stable_layer_norm: bool = False
    # WavLM: relative position buckets (0: none, HuBERT and wav2vec2) and the offset at which
    # the last bucket starts
    relative_buckets: int = 0
    relative_distance: int = 800

    @classmethod
    def from_shapes(cls, shapes: dict[str, list[int]], prefix: str, **fixed) -> dict:
        """The sizes tensor shapes tell (those under `prefix`, weight norm folded or not) as
        keyword arguments (relative_buckets only for a WavLM); what they cannot tell (heads,
        strides, eps) comes from `fixed` or the defaults."""
        def shape(key: str) -> list[int]:
            for k in (key, key.replace(".weight", ".parametrizations.weight.original1"),
                      key + "_v"):
                if prefix + k in shapes:
                    return shapes[prefix + k]
            raise KeyError(prefix + key)

        def count(pattern: str) -> int:
            return len({m[1] for k in shapes
                        if k.startswith(prefix) and (m := re.match(pattern, k[len(prefix):]))})

        relative = prefix + "encoder.layers.0.attention.rel_attn_embed.weight"
        convs = [shape(f"feature_extractor.conv_layers.{i}.conv.weight")
                 for i in range(count(r"feature_extractor\.conv_layers\.(\d+)\."))]
        hidden = shape("feature_projection.projection.weight")[0]
        pos = shape("encoder.pos_conv_embed.conv.weight")
        return {"conv_dims": tuple(s[0] for s in convs), "conv_kernels": tuple(s[2] for s in convs),
                "hidden_size": hidden,
                "intermediate_size": shape("encoder.layers.0.feed_forward.intermediate_dense."
                                           "weight")[0],
                "layers": count(r"encoder\.layers\.(\d+)\."),
                "pos_conv_kernel": pos[2], "pos_conv_groups": hidden // pos[1],
                "projection_norm": prefix + "feature_projection.layer_norm.weight" in shapes,
                "stable_layer_norm":
                    prefix + "feature_extractor.conv_layers.1.layer_norm.weight" in shapes,
                **({"relative_buckets": shapes[relative][0]} if relative in shapes else {}),
                **fixed}


def fold_positional_conv(sd: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The positional convolution's weight norm (over the kernel axis, dim 2) folded, in
    place; `prefix` names the HuBERT (e.g. "semantic_model.")."""
    conv = prefix + "encoder.pos_conv_embed.conv."
    for g_name, v_name in (("weight_g", "weight_v"),
                           ("parametrizations.weight.original0",
                            "parametrizations.weight.original1")):
        if conv + g_name in sd:
            g, v = sd.pop(conv + g_name), sd.pop(conv + v_name)
            sd[conv + "weight"] = torch._weight_norm(v.float(), g.float(), 2)
    return sd


class HubertConv(nn.Module):
    """A strided convolution, a norm ("group": GroupNorm with a group per channel, over the
    whole input; "layer": LayerNorm over the channels of each step; None) and GELU."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, norm: str | None):
        super().__init__()
        self.conv = Conv1d(c_in, c_out, kernel, stride=stride, bias=norm == "layer")
        self.layer_norm = (nn.GroupNorm(c_out, c_out) if norm == "group" else
                           nn.LayerNorm(c_out) if norm == "layer" else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if isinstance(self.layer_norm, nn.LayerNorm):
            x = self.layer_norm(x.transpose(1, 2)).transpose(1, 2)
        elif self.layer_norm is not None:
            x = self.layer_norm(x)
        return F.gelu(x)


class HubertFeatureEncoder(nn.Module):
    """Strided convolutions with GELU: bias-free, the first one's GroupNorm normalising each
    channel over the whole input; or (stable_layer_norm) each with a bias and a LayerNorm."""

    def __init__(self, cfg: HubertConfig):
        super().__init__()
        dims = (1, *cfg.conv_dims)
        self.conv_layers = nn.ModuleList(
            HubertConv(dims[i], dims[i + 1], k, s,
                       "layer" if cfg.stable_layer_norm else "group" if i == 0 else None)
            for i, (k, s) in enumerate(zip(cfg.conv_kernels, cfg.conv_strides, strict=True)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.conv_layers:
            x = layer(x)
        return x


class HubertProjection(nn.Module):
    def __init__(self, c_in: int, dim: int, norm: bool, eps: float):
        super().__init__()
        self.layer_norm = nn.LayerNorm(c_in, eps=eps) if norm else None
        self.projection = Linear(c_in, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(x if self.layer_norm is None else self.layer_norm(x))


class HubertPositionalConv(nn.Module):
    """A grouped convolution over time (even kernel: its last output dropped), then GELU."""

    def __init__(self, dim: int, kernel: int, groups: int):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=groups)
        self.drop = 1 - kernel % 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.transpose(1, 2))
        return F.gelu(y[..., : y.shape[-1] - self.drop]).transpose(1, 2)


class HubertAttention(nn.Module):
    """Multi-head self-attention. With `relative` buckets (WavLM) the scores get the position
    bias [H, T, T] (`bias`: the first layer's `position_bias`) times a gate of each query's
    input per head, a (b c - 1) + 2: a and b sigmoids of a projection of the head's channels
    (to 8, summed in fours), c a learned constant."""

    def __init__(self, dim: int, heads: int, relative: int = 0, distance: int = 800,
                 first: bool = False):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = Linear(dim, dim), Linear(dim, dim)
        self.v_proj, self.out_proj = Linear(dim, dim), Linear(dim, dim)
        self.buckets, self.distance = relative, distance
        if relative:
            self.gru_rel_pos_const = nn.Parameter(torch.ones(1, heads, 1, 1))
            self.gru_rel_pos_linear = nn.Linear(dim // heads, 8)
            if first:
                self.rel_attn_embed = nn.Embedding(relative, heads)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.heads, -1).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        if bias is None:
            y = full_attention(q, k, v)
        else:
            gate = self.gru_rel_pos_linear(x.view(b, t, self.heads, -1).transpose(1, 2))
            a, g = torch.sigmoid(gate.view(b, self.heads, t, 2, 4).sum(-1)).chunk(2, dim=-1)
            gate = a * (g * self.gru_rel_pos_const - 1.0) + 2.0  # [B, H, T, 1]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=gate * bias)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, d))

    def position_bias(self, t: int, device=None) -> torch.Tensor:
        """[H, T, T]: the embedding of each key - query offset's bucket (half the buckets for
        each sign; offsets below a quarter of them exact, then logarithmic up to `distance`)."""
        offset = torch.arange(t, device=device)[None, :] - torch.arange(t, device=device)[:, None]
        half = self.buckets // 2
        exact = half // 2
        size = offset.abs()
        far = exact + (torch.log(size.float() / exact) / math.log(self.distance / exact)
                       * (half - exact)).to(torch.long)
        bucket = (offset > 0).long() * half + torch.where(
            size < exact, size, torch.clamp(far, max=half - 1))
        return self.rel_attn_embed(bucket).permute(2, 0, 1)


class HubertFeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.intermediate_dense = Linear(dim, hidden)
        self.output_dense = Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class HubertLayer(nn.Module):
    """Post-norm: x = LN(x + attention(x)); x = LN(x + feed_forward(x)). Pre-norm (`pre_norm`):
    x = x + attention(LN(x)); x = x + feed_forward(LN(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, eps: float, pre_norm: bool = False,
                 relative: int = 0, distance: int = 800, first: bool = False):
        super().__init__()
        self.attention = HubertAttention(dim, heads, relative, distance, first)
        self.layer_norm = nn.LayerNorm(dim, eps=eps)
        self.feed_forward = HubertFeedForward(dim, hidden)
        self.final_layer_norm = nn.LayerNorm(dim, eps=eps)
        self.pre_norm = pre_norm

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attention(self.layer_norm(x), bias)
            return x + self.feed_forward(self.final_layer_norm(x))
        x = self.layer_norm(x + self.attention(x, bias))
        return self.final_layer_norm(x + self.feed_forward(x))


class HubertEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        dim = cfg.hidden_size
        self.pos_conv_embed = HubertPositionalConv(dim, cfg.pos_conv_kernel, cfg.pos_conv_groups)
        self.layer_norm = nn.LayerNorm(dim, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(
            HubertLayer(dim, cfg.heads, cfg.intermediate_size, cfg.layer_norm_eps,
                        cfg.stable_layer_norm, cfg.relative_buckets, cfg.relative_distance,
                        first=i == 0)
            for i in range(cfg.layers))
        self.pre_norm = cfg.stable_layer_norm

    def forward(self, x: torch.Tensor, each: Callable[[torch.Tensor], None] | None = None,
                layers: int | None = None) -> torch.Tensor:
        """The last layer's output; `each` sees every hidden state (the first layer norm's
        output, or with pre-norm layers their input, then each layer's). layers: run only the
        first this many (their last output is returned, without a pre-norm encoder's final
        LayerNorm)."""
        x = x + self.pos_conv_embed(x)
        if not self.pre_norm:
            x = self.layer_norm(x)
        first = self.layers[0].attention
        bias = first.position_bias(x.shape[1], x.device).to(x.dtype) if first.buckets else None
        for layer in self.layers[:layers]:
            if each is not None:
                each(x)
            x = layer(x, bias)
        if each is not None:
            each(x)
        if self.pre_norm and layers is None:
            x = self.layer_norm(x)
        return x


class Hubert(nn.Module):
    """Raw 16 kHz audio [B, N] -> hidden states [B, frames, hidden]: the last layer's, or
    (`average=True`) the mean of all of them (the input layer norm's and each layer's, as
    transformers' `output_hidden_states` lists them)."""

    def __init__(self, cfg: HubertConfig):
        super().__init__()
        self.feature_extractor = HubertFeatureEncoder(cfg)
        self.feature_projection = HubertProjection(cfg.conv_dims[-1], cfg.hidden_size,
                                                   cfg.projection_norm, cfg.layer_norm_eps)
        self.encoder = HubertEncoder(cfg)

    def forward(self, audio: torch.Tensor, average: bool = False) -> torch.Tensor:
        x = self.features(audio)
        if not average:
            return self.encoder(x)
        states: list[torch.Tensor] = []
        self.encoder(x, states.append)
        return torch.stack(states, 1).mean(1)  # (the reference's expression: its sum order)

    def features(self, audio: torch.Tensor) -> torch.Tensor:
        """The encoder's input [B, frames, hidden] (the projected convolution features)."""
        x = self.feature_extractor(audio[:, None]).transpose(1, 2)
        return self.feature_projection(x)

    def hidden_states(self, audio: torch.Tensor, layers: tuple[int, ...]) -> list[torch.Tensor]:
        """The outputs of the given layers (1-based, as transformers' `hidden_states[k]`, before
        a pre-norm encoder's final LayerNorm), running no layer past the last one asked for."""
        states: list[torch.Tensor] = []
        self.encoder(self.features(audio), states.append, layers=max(layers))
        return [states[k] for k in layers]
