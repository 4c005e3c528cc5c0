"""Run a convolution stack with a finite receptive field over overlapping time windows.

High-rate activations are large (a 10 s, 48-channel, 2x upsampled signal is 61 MB). On CPU each
tensor that size is a fresh memory mapping whose pages fault on first touch, and every
elementwise step streams it through memory again: a whole-signal pass spends more time there
than computing. Run on windows of about a megabyte per tensor instead, the same steps stay in
the cache and reuse the allocator's memory.

Exact: a window carries `radius` steps of real signal on each side beyond the outputs it keeps,
so every kept output sees the same inputs as in one whole-signal pass; the window's own edge
padding only reaches outputs that are dropped. At the signal's ends the window is the signal's
end, with its real padding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Stack = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


def map_windows(fn: Stack, x: torch.Tensor, lengths: torch.Tensor | None, *, stride: int,
                radius: int, window: int) -> torch.Tensor:
    """fn(x, lengths) for x [B, C, T], computed window by window.

    `fn` maps T input steps (a multiple of `stride`) to T // stride outputs, output m depending
    only on inputs within `radius` steps of m * stride; it takes per-item valid lengths (or None)
    as a padded batch's layers do. `window`: input steps of kept output per window (rounded up to
    a multiple of stride).
    """
    total = x.shape[-1]
    window = -(-window // stride) * stride
    halo = -(-radius // stride) * stride
    if total <= window + 2 * halo:
        return fn(x, lengths)
    pieces = []
    for start in range(0, total, window):
        stop = min(total, start + window)
        a, b = max(0, start - halo), min(total, stop + halo)
        # Item lengths in window coordinates. An item that ended before the window only yields
        # outputs past its end (discarded by the caller); 1 keeps the edge padding well defined.
        local = None if lengths is None else (lengths - a).clamp(1, b - a)
        y = fn(x[..., a:b], local)
        pieces.append(y[..., (start - a) // stride : (stop - a) // stride])
    return torch.cat(pieces, dim=-1)
