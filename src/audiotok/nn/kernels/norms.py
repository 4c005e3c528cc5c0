"""Normalisations in the form that is fast on the data's layout."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..tracing import exporting
from .convs import is_channels_last


def group_norm(y: torch.Tensor, norm: nn.GroupNorm) -> torch.Tensor:
    """norm(y) for a GroupNorm of one group; of channels-last y [B, C, T] without a copy to
    channels-first (nn.GroupNorm copies it): one group is a layer norm over (T, C) of the
    transposed view, then the per-channel affine. A layer norm runs a row on one thread, so
    an even T is normalised as two halves (a row each) whose statistics are then joined: the
    per-channel affine corrects each half to the whole's mean and spread (in float32; the
    statistics of a bfloat16 row are too coarse to join)."""
    if norm.num_groups != 1 or not is_channels_last(y):
        return norm(y)
    t = y.transpose(1, 2)  # [B, T, C], contiguous
    b, steps, c = t.shape
    if steps % 2 or steps * c < 2**16 or y.dtype != torch.float32 or exporting():
        out = F.layer_norm(t, t.shape[1:], eps=norm.eps)
        return torch.addcmul(norm.bias, out, norm.weight).transpose(1, 2)
    halves = t.reshape(2 * b, steps // 2 * c)
    out, mean, rstd = torch.native_layer_norm(halves, halves.shape[1:], None, None, norm.eps)
    mean, rstd = mean.view(b, 2), rstd.view(b, 2)  # each half's
    whole = mean.mean(1, keepdim=True)
    var = (rstd**-2 - norm.eps + (mean - whole).square()).mean(1, keepdim=True)  # the whole's
    scale = torch.rsqrt(var + norm.eps)  # [B, 1]
    gain = (scale / rstd).view(2 * b, 1, 1) * norm.weight
    shift = ((mean - whole) * scale).view(2 * b, 1, 1) * norm.weight + norm.bias
    out = out.view(2 * b, steps // 2, c)
    return torch.addcmul(shift, out, gain, out=out).view(b, steps, c).transpose(1, 2)
