"""OuteTTS 1.0's way of running DAC.speech (outetts 0.4.4, `dac/interface.py`): the
`pipeline="outetts"` load option, which gives the tokens and audio OuteTTS gives.

- Encode: the loudness normalised to -18 LUFS (ITU-R BS.1770 as pyloudnorm measures it, 0.4 s
  blocks; a clip shorter than a block is measured zero-padded and cut back), then scaled down
  to a -1 dBFS peak if it exceeds one; encoded in independent windows of 5 s (120 000 samples),
  the last one zero-padded to whole frames; the windows' codes one after another.
- Decode: independent chunks of 2048 frames, each decoded and faded in and out over 15 ms
  (linear ramps), one after another (each chunk 8 samples short of 320 a frame), and the whole
  loudness-normalised again.

A silent signal has no loudness to normalise (the reference's gain is then infinite and its
audio NaN): it is kept as it is."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from ...errors import AudiotokError

RATE = 24000
TARGET_LUFS = -18.0
PEAK_DBFS = -1.0
BLOCK_SECONDS = 0.4
WINDOW_SAMPLES = 120_000  # 5 s, whole frames of 320
CHUNK_FRAMES = 2048
FADE_SAMPLES = int(RATE * 0.015)


def normalise_loudness(audio: torch.Tensor) -> torch.Tensor:
    """[N] float32 at 24 kHz -> [N] at -18 LUFS, its peak at most -1 dBFS (computed in float64
    as pyloudnorm computes it, then float32, as the reference)."""
    try:
        import pyloudnorm
    except ImportError:
        raise AudiotokError("the OuteTTS pipeline measures loudness with pyloudnorm: pip "
                            "install pyloudnorm") from None
    x = audio.detach().float().cpu().numpy()
    n, block = x.size, int(BLOCK_SECONDS * RATE)
    padded = np.pad(x, (0, block - n)) if n < block else x
    with warnings.catch_warnings():  # (pyloudnorm warns of clipping; the peak limit follows)
        warnings.simplefilter("ignore")
        loudness = pyloudnorm.Meter(RATE, block_size=BLOCK_SECONDS).integrated_loudness(padded)
        if not np.isfinite(loudness):
            return audio.clone()
        out = pyloudnorm.normalize.loudness(padded, loudness, TARGET_LUFS)
        if np.max(np.abs(out)) > 10 ** (PEAK_DBFS / 20):
            out = pyloudnorm.normalize.peak(out, PEAK_DBFS)
    return torch.from_numpy(np.ascontiguousarray(out[:n])).float().to(audio.device)


def fade(audio: torch.Tensor) -> torch.Tensor:
    """[..., N] with 15 ms linear ramps in and out (at most half of N each), in place."""
    n = audio.shape[-1]
    k = min(FADE_SAMPLES, n // 2)
    audio[..., :k] *= torch.linspace(0.0, 1.0, k, device=audio.device)
    audio[..., n - k:] *= torch.linspace(1.0, 0.0, k, device=audio.device)
    return audio


def decoded_length(frames: int, decoded_samples: Callable[[int], int]) -> int:
    """Samples `frames` frames decode to: each chunk of 2048 frames on its own."""
    return sum(decoded_samples(min(CHUNK_FRAMES, frames - s))
               for s in range(0, frames, CHUNK_FRAMES))


def encode_items(items: list, encode_by_length: Callable, hop: int) -> list[torch.Tensor]:
    """Tokens [K, T_i] per item (AudioItem, mono at 24 kHz): normalised, then its 5 s windows
    encoded and joined. The items' n-th windows run together (those of one length as one
    batch), so memory grows with the batch, not with an item's length."""
    signals = [normalise_loudness(item.samples.reshape(-1)) for item in items]
    codes: list[list[torch.Tensor]] = [[] for _ in items]
    for start in range(0, max(x.numel() for x in signals), WINDOW_SAMPLES):
        owners = [i for i, x in enumerate(signals) if x.numel() > start]
        windows = [replace(items[i], samples=signals[i][start: start + WINDOW_SAMPLES])
                   for i in owners]
        lengths = [-(-w.samples.numel() // hop) * hop for w in windows]
        for i, c in zip(owners, encode_by_length(windows, lengths), strict=True):
            codes[i].append(c)
    return [torch.cat(c, -1) for c in codes]


def decode_batch(tokens: torch.Tensor, lengths: torch.Tensor, decode_by_length: Callable,
                 decoded_samples: Callable[[int], int], hop: int) -> torch.Tensor:
    """Audio [B, 1, T x hop] of tokens [B, K, T] (item b's first decoded_length(lengths[b])
    samples, zeros after): each item's chunks decoded and faded, joined and normalised. The
    items' n-th chunks run together (those of one length as one batch)."""
    n = lengths.tolist()
    parts: list[list[torch.Tensor]] = [[] for _ in n]
    for start in range(0, max(n, default=0), CHUNK_FRAMES):
        owners = [b for b, m in enumerate(n) if m > start]
        sizes = torch.tensor([min(CHUNK_FRAMES, n[b] - start) for b in owners])
        audio = decode_by_length(tokens[owners, :, start: start + CHUNK_FRAMES], sizes)
        for j, (b, m) in enumerate(zip(owners, sizes.tolist(), strict=True)):
            parts[b].append(fade(audio[j, 0, : decoded_samples(m)].clone()))
    out = torch.zeros(tokens.shape[0], 1, tokens.shape[-1] * hop, device=tokens.device)
    for b, p in enumerate(parts):
        if p:
            whole = normalise_loudness(torch.cat(p))
            out[b, 0, : whole.numel()] = whole.to(out.device)
    return out
