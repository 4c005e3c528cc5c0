"""Per-item lengths in padded batches: make the padding look like each item's own edge, so that
non-causal layers give every item exactly what it would get alone."""

from __future__ import annotations

import torch


def time_mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    """[B, size] bool, True where t < lengths[b]."""
    return torch.arange(size, device=lengths.device)[None, :] < lengths[:, None]


def zero_tail(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    """x [B, C, T] with every position t >= lengths[b] set to zero (the padding a conv sees at
    the end of a lone item). No-op when lengths is None."""
    if lengths is None:
        return x
    return x * time_mask(lengths.to(x.device), x.shape[-1])[:, None, :].to(x.dtype)


def edge_tail(x: torch.Tensor, lengths: torch.Tensor | None, width: int) -> torch.Tensor:
    """x [B, C, T] with positions lengths[b] .. lengths[b] + width - 1 set to the item's last
    valid sample (the replicate padding a lone item gets). No-op when lengths is None."""
    if lengths is None:
        return x
    lengths = lengths.to(x.device)
    t = torch.arange(x.shape[-1], device=x.device)[None, :]
    tail = (t >= lengths[:, None]) & (t < lengths[:, None] + width)
    last = x.gather(-1, (lengths - 1).view(-1, 1, 1).expand(-1, x.shape[1], 1))
    return torch.where(tail[:, None, :], last, x)
