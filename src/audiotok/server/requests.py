"""Offline requests as one padded batch (the engine batches the requests that arrive within
a short window): each request's result equals its call alone."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..codes import Codes


class ScaledTokens(NamedTuple):
    """An encode's tokens [K, T] and its segments' scales [S], for codes that carry them."""

    tokens: np.ndarray
    scales: np.ndarray


class UtteranceTokens(NamedTuple):
    """An encode's tokens [K, T] and its utterance tokens [G], for a codec that has them
    (Codes.globals)."""

    tokens: np.ndarray
    globals: np.ndarray


def run_offline(codec, kind: str, payloads: list) -> list:
    """One padded batch of whole requests (per-item results equal one-at-a-time calls).
    encode: audio float32 [n] ([C, n]) at the codec's input rate -> tokens int64 [K, T] (codes
    that carry scales: ScaledTokens; a codec with utterance tokens: UtteranceTokens); decode:
    (tokens [K, T], num_samples or None, scales [S] or None, utterance tokens [G] or None,
    conditioning: decode()'s keywords, e.g. a voice) -> audio float32 [N] ([C, N] for C > 1
    channels); requests of one conditioning run as one call."""
    if kind == "encode":
        codes = codec.encode([torch.from_numpy(a) for a in payloads], codec.input_rate)
        tokens = codes.tokens.numpy()
        out = [tokens[i, :, :n] for i, n in enumerate(codes.lengths.tolist())]
        if codes.globals is not None:
            return [UtteranceTokens(t, codes.globals[i].numpy()) for i, t in enumerate(out)]
        if codes.scales is None:
            return out
        return [ScaledTokens(t, codes.scales[i, : codec.segment_count(t.shape[1])].numpy())
                for i, t in enumerate(out)]
    groups: dict[tuple, list[int]] = {}
    for i, (*_, conditioning) in enumerate(payloads):
        key = tuple(sorted((k, id(v)) for k, v in conditioning.items()))
        groups.setdefault(key, []).append(i)
    out: list = [None] * len(payloads)
    for group in groups.values():
        audio = _decode(codec, [payloads[i][:4] for i in group], payloads[group[0]][4])
        for i, a in zip(group, audio, strict=True):
            out[i] = a
    return out


def _decode(codec, payloads: list, conditioning: dict) -> list:
    """Audio of (tokens, num_samples, scales, globals) requests as one padded batch."""
    lengths = [t.shape[1] for t, *_ in payloads]
    tokens = torch.zeros(len(payloads), codec.num_codebooks, max(lengths), dtype=torch.long)
    for i, (t, *_) in enumerate(payloads):
        tokens[i, :, : t.shape[1]] = t
    scales = None
    if any(sc is not None for _, _, sc, _ in payloads):  # those without: ones (unscaled)
        scales = torch.ones(len(payloads), max(codec.segment_count(n) for n in lengths))
        for i, (_, _, sc, _) in enumerate(payloads):
            if sc is not None:
                scales[i, : sc.shape[0]] = torch.from_numpy(sc)
    utterance = None
    if codec.global_tokens:
        utterance = torch.stack([torch.as_tensor(g) for *_, g in payloads])
    spf = codec.samples_per_frame
    num_samples = torch.tensor([n * spf if ns is None else ns
                                for n, (_, ns, _, _) in zip(lengths, payloads, strict=True)])
    audio = codec.decode(Codes(tokens, torch.tensor(lengths), codec=codec.name,
                               sample_rate=codec.sample_rate, samples_per_frame=spf,
                               num_samples=num_samples, scales=scales, globals=utterance),
                         **conditioning).numpy()
    n_out = codec.audio_lengths(torch.tensor(lengths), num_samples).tolist()
    if codec.channels > 1:
        return [audio[i, :, :n] for i, n in enumerate(n_out)]
    return [audio[i, 0, :n] for i, n in enumerate(n_out)]
