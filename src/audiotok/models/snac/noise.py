"""The decoder's noise, three ways.

SNAC's decoder adds `n * conv1x1(x)` after each transposed convolution, n one standard normal
value per (item, time step), on every call (trained that way; the reference draws it from
torch's global generator even in eval mode). Drawn from a global generator, the noise of an item
depends on what else is in its batch and on every earlier draw, so neither a batch nor a stream
can equal the item decoded alone. The settings:

- "seeded" (default): n is a function of (seed, block, absolute time step), a counter-based
  normal below, so any batch, window or stream of the same tokens gets the same noise;
- "torch": torch.randn((B, 1, T)) in the reference's order and shapes, so with the same global
  seed the output equals the reference's;
- "off": no noise term (the output the reference gives with its noise weights zeroed).
"""

from __future__ import annotations

import math

import torch

NOISE_MODES = ("seeded", "torch", "off")
_MASK32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """x * c mod 2^32 for x in [0, 2^32) as int64, without overflowing int64."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _MASK32


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer mixer (xor-shift-multiply rounds) on int64 holding 32-bit values."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def position_normal(seed: int, block: int, positions: torch.Tensor,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One standard normal value per position (int64 [T], >= 0) of noise block `block`, a pure
    function of (seed, block, position): Box-Muller over two hashed uniforms, in float64."""
    key = int(_hash32(torch.tensor((seed & _MASK32) ^ (block * 0x9E3779B9 & _MASK32))))
    p = positions.long() & _MASK32
    h1 = _hash32(_hash32(p ^ key) ^ 0x68E31DA4)
    h2 = _hash32(_hash32(p ^ key) ^ 0xB5297A4D)
    u1 = (h1.double() + 0.5) / 2**32
    u2 = (h2.double() + 0.5) / 2**32
    return (torch.sqrt(-2 * torch.log(u1)) * torch.cos(2 * math.pi * u2)).to(dtype)
