"""HuBERT (transformers' HubertModel with a group-norm feature encoder and post-norm layers, as
HuBERT-base and DistilHuBERT): raw 16 kHz audio -> hidden states at 50 Hz. Module names are
transformers', so its state dicts load as they are (the positional convolution's weight norm
folded by `fold_positional_conv`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

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

    @classmethod
    def from_shapes(cls, shapes: dict[str, list[int]], prefix: str, **fixed) -> dict:
        """The sizes tensor shapes tell (those under `prefix`, weight norm folded or not) as
        keyword arguments; what they cannot tell (heads, strides, eps) comes from `fixed` or
        the defaults."""
        def shape(key: str) -> list[int]:
            for k in (key, key.replace(".weight", ".parametrizations.weight.original1"),
                      key + "_v"):
                if prefix + k in shapes:
                    return shapes[prefix + k]
            raise KeyError(prefix + key)

        def count(pattern: str) -> int:
            return len({m[1] for k in shapes
                        if k.startswith(prefix) and (m := re.match(pattern, k[len(prefix):]))})

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
    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, group_norm: bool):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, bias=False)
        self.layer_norm = nn.GroupNorm(c_out, c_out) if group_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        return F.gelu(x if self.layer_norm is None else self.layer_norm(x))


class HubertFeatureEncoder(nn.Module):
    """Bias-free strided convolutions with GELU; the first one's GroupNorm (a group per
    channel) normalises each channel over the whole input."""

    def __init__(self, cfg: HubertConfig):
        super().__init__()
        dims = (1, *cfg.conv_dims)
        self.conv_layers = nn.ModuleList(
            HubertConv(dims[i], dims[i + 1], k, s, i == 0)
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
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = Linear(dim, dim), Linear(dim, dim)
        self.v_proj, self.out_proj = Linear(dim, dim), Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.heads, -1).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        y = full_attention(q, k, v)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, d))


class HubertFeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.intermediate_dense = Linear(dim, hidden)
        self.output_dense = Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class HubertLayer(nn.Module):
    """Post-norm: x = LN(x + attention(x)); x = LN(x + feed_forward(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, eps: float):
        super().__init__()
        self.attention = HubertAttention(dim, heads)
        self.layer_norm = nn.LayerNorm(dim, eps=eps)
        self.feed_forward = HubertFeedForward(dim, hidden)
        self.final_layer_norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class HubertEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig):
        super().__init__()
        dim = cfg.hidden_size
        self.pos_conv_embed = HubertPositionalConv(dim, cfg.pos_conv_kernel, cfg.pos_conv_groups)
        self.layer_norm = nn.LayerNorm(dim, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(
            HubertLayer(dim, cfg.heads, cfg.intermediate_size, cfg.layer_norm_eps)
            for _ in range(cfg.layers))

    def forward(self, x: torch.Tensor,
                each: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
        """The last layer's output; `each` sees every hidden state (the first layer norm's
        output, then each layer's)."""
        x = self.layer_norm(x + self.pos_conv_embed(x))
        for layer in self.layers:
            if each is not None:
                each(x)
            x = layer(x)
        if each is not None:
            each(x)
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
        x = self.feature_extractor(audio[:, None]).transpose(1, 2)
        x = self.feature_projection(x)
        if not average:
            return self.encoder(x)
        states: list[torch.Tensor] = []
        self.encoder(x, states.append)
        return torch.stack(states, 1).mean(1)  # (the reference's expression: its sum order)
