"""The token ids of Higgs Audio v2 (bosonai/higgs-audio-v2-generation-3B-base: Llama-3.2-3B
with audio embeddings and heads for the Higgs Audio v2 tokenizer's 8 codebooks). No tokenizer:
the audio ids are the codes, per codebook (export/llm.py says what a scheme is).

`higgs-audio-v2` (boson-multimodal's collator and `build_delay_pattern_mask`): each clip's
codes [8, T] get a column of 1024 (the audio stream's BOS) before and a column of 1025 (its
EOS) after, then MusicGen's delay: codebook k shifted right by k steps, its k leading holes
1024, its 7 - k trailing holes 1025: [8, T + 9]. The LM sums codebook k's embedding of id
k x 1026 + value into one position a step (the text form's ids). Back: Boson's serve engine
reverts the delay (row k, steps k .. k + T + 1), clips to 0..1023 and drops the first and last
column; here the pattern's BOS and EOS are checked and an id that is not a code refused, or
(clamp=True) the serve engine's clip.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, check_tokens, delayed, ints, step_columns, text_numbers

CODES, BOS, EOS = 1024, 1024, 1025
TABLE = 1026  # each codebook's embedding rows: codes, BOS, EOS


class HiggsIds:
    """Higgs Audio v2: [8, T + 9] ids, BOS/EOS columns around the codes, codebook k delayed k
    steps (module docstring)."""

    name = "higgs-audio-v2"
    summary = ("Higgs Audio v2: BOS 1024 / EOS 1025 columns around the codes, codebook k "
               "delayed k (per-codebook tables of 1026)")
    needs_tokenizer = False
    ids_per_frame = None  # the codebooks are delayed: not read frame by frame
    PATTERN = re.compile(r"<\|higgs_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if not self.sizes or any(s != CODES for s in self.sizes):
            raise TokenIdError(f"the {self.name} scheme takes Higgs Audio v2 tokenizer tokens "
                               f"({CODES} codes a codebook), got sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> HiggsIds:
        return cls(codebook_sizes)

    def describe(self) -> dict:
        k = len(self.sizes)
        return {"scheme": self.name, "delays": list(range(k)), "bos": BOS, "eos": EOS,
                "steps": f"T + {k + 1} (a BOS and an EOS column, the delays)",
                "embedding_id": f"k x {TABLE} + value"}

    def to_ids(self, tokens) -> np.ndarray:
        """[K, T + K + 1]: codebook k holds BOS at steps 0..k, its codes at k + 1 .. k + T,
        EOS from k + T + 1 on."""
        t = check_tokens(tokens, self.sizes)
        k = len(self.sizes)
        wrapped = np.concatenate([np.full((k, 1), BOS), t, np.full((k, 1), EOS)], 1)
        steps = wrapped.shape[1] + k - 1
        return delayed(wrapped, range(k), steps, BOS, np.full((k, steps), EOS, np.int64))

    def from_ids(self, ids, clamp: bool = False) -> np.ndarray:
        """Tokens [K, T] of ids [K, S] (T = S - K - 1); the pattern's BOS and EOS must be in
        place and the rest codes, or with clamp=True anything goes: Boson's serve engine
        clips every value to 0..1023 and drops the first and last column."""
        a = ints(ids, "ids")
        k = len(self.sizes)
        if a.ndim != 2 or a.shape[0] != k or a.shape[1] < k + 1:
            raise TokenIdError(f"expected Higgs Audio v2 ids [{k}, S >= {k + 1}], got shape "
                               f"{a.shape}")
        frames = a.shape[1] - k - 1
        rows = np.stack([a[c, c : c + frames + 2] for c in range(k)])
        if clamp:
            return np.clip(rows, 0, CODES - 1)[:, 1:-1]
        want = self.to_ids(np.zeros((k, frames), np.int64))
        special = want >= CODES
        if (a[special] != want[special]).any():
            c, s = (int(i) for i in np.argwhere(special & (a != want))[0])
            raise TokenIdError(f"id {int(a[c, s])} at codebook {c}, step {s}: the delay pattern "
                               f"has {int(want[c, s])} there")
        values = rows[:, 1:-1]
        bad = (values < 0) | (values >= CODES)
        if bad.any():
            c, t = (int(i) for i in np.argwhere(bad)[0])
            raise TokenIdError(f"id {int(values[c, t])} at codebook {c}, step {c + t + 1} is not "
                               f"a code (0..{CODES - 1})")
        return values

    def sequence(self, tokens) -> np.ndarray:
        """The steps one after another, each codebook's id in its embedding table
        (k x 1026 + value)."""
        ids = self.to_ids(tokens)
        return (ids + TABLE * np.arange(len(self.sizes))[:, None]).T.reshape(-1)

    def to_text(self, tokens) -> str:
        return "".join(f"<|higgs_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        k = len(self.sizes)
        ids = text_numbers(text, self.PATTERN, "a <|higgs_i|> token")
        steps = step_columns(ids, k)
        table = np.arange(k)[:, None] * TABLE
        if ((steps < table) | (steps >= table + TABLE)).any():
            c, s = (int(i) for i in np.argwhere((steps < table) | (steps >= table + TABLE))[0])
            raise TokenIdError(f"<|higgs_{int(steps[c, s])}|> at step {s} is not in codebook "
                               f"{c}'s table ({c * TABLE}..{(c + 1) * TABLE - 1})")
        return self.from_ids(steps - table)
