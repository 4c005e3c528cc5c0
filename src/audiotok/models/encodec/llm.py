"""The token ids of the language models that use EnCodec (export/llm.py says what a scheme is).
None needs a tokenizer: the ids are arithmetic on the codes.

- `bark`: Bark's coarse model (suno-ai/bark `generation.py`, transformers `modeling_bark.py`
  `preprocess_histories` and the coarse output's remainder): EnCodec 24 kHz's first two
  codebooks, frame by frame, id = 10000 + 1024 k + code for codebook k (and back:
  (id - 10000) mod 1024, each id checked against its codebook's range). Bark's fine model
  takes the raw codes of all 8 codebooks (its pad id 1024), which are the codec's tokens.
- `valle`: VALL-E (lifeiteng/vall-e `valle/models/valle.py` `pad_y_eos` with
  `ar_audio_prepend_bos`, `macros.py`): the AR model's sequence of codebook 0, BOS 1025, the
  codes, EOS 1024 (its input is all but the last, its target all but the first); the NAR model
  takes codebooks 1-7 as raw codes (the codec's tokens).
- `musicgen`, `musicgen-stereo`: MusicGen (transformers `build_delay_pattern_mask`): the
  decoder's sequence for T frames, [K, T + K]: codebook k (stereo: the pair 2k, 2k + 1) delayed
  k steps behind a decoder-start step, every gap the pad id 2048 (also the start id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import (
    TokenIdError,
    check_tokens,
    delayed,
    ints,
    outside,
    step_columns,
    text_numbers,
)


class BarkIds:
    """Bark coarse: [2 T] ids, frame-major, 10000 + 1024 k + code."""

    name = "bark"
    summary = "Bark's coarse ids: codebooks 0-1 frame by frame, 10000 + 1024 k + code"
    needs_tokenizer = False
    SEMANTIC_VOCAB, CODES, ROWS = 10000, 1024, 2
    PATTERN = re.compile(r"<\|bark_(\d+)\|>")
    ids_per_frame = ROWS

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if len(self.sizes) < self.ROWS or any(s != self.CODES for s in self.sizes):
            raise TokenIdError(f"the bark scheme takes EnCodec 24 kHz tokens (at least 2 "
                               f"codebooks of 1024), got sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    def describe(self) -> dict:
        return {"scheme": self.name, "first_id": self.SEMANTIC_VOCAB,
                "ids_per_codebook": self.CODES, "codebooks": self.ROWS,
                "fine": "the codec's tokens of all 8 codebooks (pad 1024)"}

    def to_ids(self, tokens) -> np.ndarray:
        """[2 T] ids of the first two codebooks of tokens [K >= 2, T]."""
        t = check_tokens(tokens, self.sizes)[: self.ROWS]
        return (t + self.SEMANTIC_VOCAB + self.CODES * np.arange(self.ROWS)[:, None]).T.reshape(-1)

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [2, T] of 2 T coarse ids (each in its codebook's range)."""
        a = ints(ids, "ids").reshape(-1)
        if a.size % self.ROWS:
            raise TokenIdError(f"{a.size} Bark coarse ids are not whole frames of {self.ROWS}")
        frames = a.reshape(-1, self.ROWS)
        for k in range(self.ROWS):
            lo = self.SEMANTIC_VOCAB + self.CODES * k
            outside(frames[:, k], lo, lo + self.CODES, f"a coarse id of codebook {k}")
        return (frames - self.SEMANTIC_VOCAB).T % self.CODES

    def slot_ids(self, k: int) -> tuple[int, int]:
        lo = self.SEMANTIC_VOCAB + self.CODES * k
        return lo, lo + self.CODES

    def to_text(self, tokens) -> str:
        return "".join(f"<|bark_{int(i)}|>" for i in self.to_ids(tokens))

    def text_ids(self, text: str) -> np.ndarray:
        return text_numbers(text, self.PATTERN, "a <|bark_i|> token")

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(self.text_ids(text))


class ValleIds:
    """VALL-E's AR sequence: [T + 2] = BOS 1025, codebook 0's codes, EOS 1024."""

    name = "valle"
    summary = "VALL-E's AR sequence: BOS 1025, codebook 0's codes, EOS 1024"
    needs_tokenizer = False
    CODES, EOS, BOS = 1024, 1024, 1025
    PATTERN = re.compile(r"<\|valle_(\d+)\|>")
    ids_per_frame = None  # framed by BOS and EOS, one codebook

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if not self.sizes or any(s != self.CODES for s in self.sizes):
            raise TokenIdError(f"the valle scheme takes EnCodec 24 kHz tokens (codebooks of "
                               f"1024), got sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    def describe(self) -> dict:
        return {"scheme": self.name, "bos": self.BOS, "eos": self.EOS,
                "nar": "codebooks 1-7: the codec's tokens"}

    def to_ids(self, tokens) -> np.ndarray:
        t = check_tokens(tokens, self.sizes)
        return np.concatenate([[self.BOS], t[0], [self.EOS]]).astype(np.int64)

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [1, T] (codebook 0) of an AR sequence: BOS, codes, EOS (a generated one
        without the BOS, or cut before the EOS, reads too)."""
        a = ints(ids, "ids").reshape(-1)
        if a.size and a[0] == self.BOS:
            a = a[1:]
        if a.size and a[-1] == self.EOS:
            a = a[:-1]
        outside(a, 0, self.CODES, "a code of codebook 0")
        return a[None]

    def to_text(self, tokens) -> str:
        return "".join(f"<|valle_{int(i)}|>" for i in self.to_ids(tokens))

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(text_numbers(text, self.PATTERN, "a <|valle_i|> token"))


class MusicgenIds:
    """MusicGen: [K, T + K], codebook k delayed k behind a decoder-start step, gaps 2048."""

    name = "musicgen"
    summary = "MusicGen: codebook k delayed k behind a start step, pad/start 2048"
    needs_tokenizer = False
    PAD = 2048
    stereo = False
    ids_per_frame = None  # delayed
    PATTERN = re.compile(r"<\|musicgen_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if not self.sizes or any(s > self.PAD for s in self.sizes) or \
                (self.stereo and len(self.sizes) % 2):
            raise TokenIdError(f"the {self.name} scheme takes codebooks of at most {self.PAD} "
                               f"codes{' in left/right pairs' if self.stereo else ''}, got "
                               f"sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    @property
    def delays(self) -> list[int]:
        return [k // 2 if self.stereo else k for k in range(len(self.sizes))]

    def describe(self) -> dict:
        return {"scheme": self.name, "delays": self.delays, "pad": self.PAD,
                "decoder_start": self.PAD, "steps": "T + K (stereo: T + K / 2)"}

    def _steps(self, frames: int) -> int:
        return frames + max(self.delays) + 1

    def to_ids(self, tokens) -> np.ndarray:
        t = check_tokens(tokens, self.sizes)
        steps = self._steps(t.shape[1])
        fill = np.full((len(self.sizes), steps), self.PAD, np.int64)
        return delayed(t, [d + 1 for d in self.delays], steps, self.PAD, fill)

    def sequence(self, tokens) -> np.ndarray:
        """The steps one after another (step 0 of every codebook, then step 1, ...)."""
        return self.to_ids(tokens).T.reshape(-1)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [K, T] of a delayed sequence [K, S] (T = S - K, stereo S - K / 2): every pad in
        its place, every code in range."""
        a = ints(ids, "ids")
        k, top = len(self.sizes), max(self.delays) + 1
        if a.ndim != 2 or a.shape[0] != k or a.shape[1] < top:
            raise TokenIdError(f"expected {self.name} ids [{k}, S >= {top}], got shape "
                               f"{a.shape}")
        frames = a.shape[1] - top
        want = self.to_ids(np.zeros((k, frames), np.int64))
        gaps = want == self.PAD  # (the codes of zeros are 0: every PAD is a gap)
        if (a[gaps] != self.PAD).any():
            c, s = (int(i) for i in np.argwhere(gaps & (a != self.PAD))[0])
            raise TokenIdError(f"id {int(a[c, s])} at codebook {c}, step {s}: the delay pattern "
                               f"has the pad {self.PAD} there")
        tokens = np.stack([a[c, d + 1 : d + 1 + frames] for c, d in enumerate(self.delays)])
        for c, size in enumerate(self.sizes):
            bad = (tokens[c] < 0) | (tokens[c] >= size)
            if bad.any():
                f = int(np.argmax(bad))
                raise TokenIdError(f"id {int(tokens[c, f])} at codebook {c}, step "
                                   f"{self.delays[c] + 1 + f} is not a code (0..{size - 1})")
        return tokens

    def to_text(self, tokens) -> str:
        return "".join(f"<|{self.name}_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        ids = text_numbers(text, self.PATTERN, f"a <|{self.name}_i|> token")
        return self.from_ids(step_columns(ids, len(self.sizes)))


class MusicgenStereoIds(MusicgenIds):
    """MusicGen stereo: codebooks in left/right pairs, both of pair k delayed k."""

    name = "musicgen-stereo"
    summary = "MusicGen stereo: left/right codebook pairs, pair k delayed k, pad/start 2048"
    stereo = True
    PATTERN = re.compile(r"<\|musicgen-stereo_(\d+)\|>")
