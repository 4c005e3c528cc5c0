"""The token ids of the language models that use DAC (export/llm.py says what a scheme is).
Dia's and Parler-TTS's (DAC 44.1 kHz) need no tokenizer: their audio ids are the codes, per
codebook, with the codebooks delayed and the gaps filled with special ids. OuteTTS 1.0's
(DAC.speech) are text tokens of its tokenizer.

- `dia`: Dia (nari-labs/dia `dia/audio.py`, `dia/model.py`, `dia/config.py`): 9 channels, each
  an embedding of 1028 (codes 0..1023, EOS 1024, PAD 1025, BOS 1026); channel c delayed by
  (0, 8, 9, 10, 11, 12, 13, 14, 15)[c] steps. The decoder's sequence: a BOS step, then
  out[t, c] = in[t - delay_c, c] with BOS where t - delay_c <= 0 (`apply_audio_delay` over the
  BOS row and the codes), each channel's EOS after its codes and PAD after that (generation's
  end-of-speech countdown): T + 17 steps. Back: Dia's `revert_audio_delay` (tokens[c, t] =
  sequence[1 + t + delay_c, c]), T from channel 0's EOS (else all complete frames), and with
  `clamp=True` ids outside 0..1023 become 0 as `_generate_output` does.
- `parler`: Parler-TTS (huggingface/parler-tts `build_delay_pattern_mask`, the training
  scripts' label preparation): codebook k delayed by k steps, BOS 1025 before its codes,
  EOS 1024 (also its pad id) after them, the leading all-BOS step dropped: [K, T + K] labels.
- `outetts`: OuteTTS 1.0 (outetts 0.4.4, prompt format v3: `version/v3/prompt_processor.py`,
  `tokens.py`): a frame is `<|c1_a|><|c2_b|>`, 1025 tokens per codebook (codes 0..1023 and
  one more), their ids looked up in the tokenizer. The model's output interleaves the codes
  with words and their features (`<|word_start|>`, `<|t_0.32|>`, `<|energy_5|>`, ...); back to
  codes, as `extract_audio_from_tokens` does, every c1 id and every c2 id in order, anything
  else passed over, both cut to the shorter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import (
    TokenIdError,
    Vocab,
    check_pattern,
    check_tokens,
    delayed,
    ints,
    step_columns,
    text_numbers,
)

CODES = 1024


def _bad(values: np.ndarray, where: str, step_of) -> None:
    """TokenIdError naming the first code outside 0..1023 of values [K, T]."""
    bad = (values < 0) | (values >= CODES)
    if bad.any():
        c, t = (int(i) for i in np.argwhere(bad)[0])
        raise TokenIdError(f"id {int(values[c, t])} at {where} {c}, step {step_of(c, t)} is "
                           f"not a code (0..{CODES - 1})")


class _DacIds:
    """Shared: no tokenizer; DAC tokens of 1024 codes per codebook."""

    name = ""
    summary = ""
    needs_tokenizer = False
    ids_per_frame = None  # the codebooks are delayed: not read frame by frame
    PATTERN = re.compile(r"")

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    def sequence(self, tokens) -> np.ndarray:
        """The steps one after another (step 0 of every codebook, then step 1, ...)."""
        return self.to_ids(tokens).T.reshape(-1)

    def to_text(self, tokens) -> str:
        return "".join(f"<|{self.name}_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        ids = text_numbers(text, self.PATTERN, f"a <|{self.name}_i|> token")
        return self.from_ids(step_columns(ids, len(self.sizes)))


class DiaIds(_DacIds):
    """Dia: 9 channels [9, T + 17], channel c delayed 0, 8..15 steps; EOS 1024, PAD 1025, BOS
    1026 (see the module docstring)."""

    name = "dia"
    summary = "Dia: 9 channels delayed 0, 8..15, BOS 1026 / PAD 1025 / EOS 1024"
    EOS, PAD, BOS = 1024, 1025, 1026
    DELAYS = (0, 8, 9, 10, 11, 12, 13, 14, 15)
    PATTERN = re.compile(r"<\|dia_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        super().__init__(codebook_sizes)
        if self.sizes != (CODES,) * len(self.DELAYS):
            raise TokenIdError(f"the dia scheme takes DAC 44.1 kHz tokens of 9 codebooks of "
                               f"{CODES} codes, got sizes {list(self.sizes)}")

    def describe(self) -> dict:
        return {"scheme": self.name, "delays": list(self.DELAYS), "eos": self.EOS,
                "pad": self.PAD, "bos": self.BOS, "steps": "T + 17 (a BOS step, the delays, "
                "each channel's EOS)"}

    def to_ids(self, tokens) -> np.ndarray:
        """[9, T + 17]: step 0 BOS; channel c: BOS through step delay_c, its codes at steps
        delay_c + 1 .. delay_c + T, EOS at delay_c + T + 1, PAD after."""
        t = check_tokens(tokens, self.sizes)
        steps = t.shape[1] + max(self.DELAYS) + 2
        after = np.full((len(self.DELAYS), steps), self.PAD, np.int64)
        after[:, 0] = self.EOS
        return delayed(t, [d + 1 for d in self.DELAYS], steps, self.BOS, after)

    def from_ids(self, ids, clamp: bool = False) -> np.ndarray:
        """Tokens [9, T] of a Dia sequence [9, S] that starts with the BOS step: T frames up to
        channel 0's first EOS (without one: every frame whose channels are all there, S - 16).
        An id that is not a code is refused with its place, or with clamp=True made 0 (Dia's
        output handling)."""
        a = ints(ids, "ids")
        k, top = len(self.DELAYS), max(self.DELAYS)
        if a.ndim != 2 or a.shape[0] != k or a.shape[1] < top + 1:
            raise TokenIdError(f"expected Dia channels [{k}, S >= {top + 1}], got shape "
                               f"{a.shape}")
        if (a[:, 0] != self.BOS).any():
            raise TokenIdError(f"a Dia sequence starts with the BOS step ({self.BOS} on every "
                               f"channel), got {a[:, 0].tolist()}")
        eos = np.flatnonzero(a[0, 1:] == self.EOS)
        frames = int(eos[0]) if eos.size else a.shape[1] - 1 - top
        frames = min(frames, a.shape[1] - 1 - top)
        values = np.stack([a[c, 1 + d : 1 + d + frames] for c, d in enumerate(self.DELAYS)])
        if clamp:
            return np.where((values < 0) | (values >= CODES), 0, values)
        _bad(values, "channel", lambda c, t: 1 + t + self.DELAYS[c])
        return values


class ParlerIds(_DacIds):
    """Parler-TTS: [K, T + K] labels, codebook k delayed k steps, BOS 1025 before and EOS 1024
    after its codes (see the module docstring)."""

    name = "parler"
    summary = "Parler-TTS: codebook k delayed k, BOS 1025 before, EOS/pad 1024 after"
    EOS, BOS = 1024, 1025
    PATTERN = re.compile(r"<\|parler_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        super().__init__(codebook_sizes)
        if not self.sizes or any(s != CODES for s in self.sizes):
            raise TokenIdError(f"the parler scheme takes DAC tokens of {CODES} codes per "
                               f"codebook, got sizes {list(self.sizes)}")

    def describe(self) -> dict:
        return {"scheme": self.name, "delays": list(range(len(self.sizes))), "bos": self.BOS,
                "eos": self.EOS, "pad": self.EOS, "steps": "T + K"}

    def to_ids(self, tokens) -> np.ndarray:
        """[K, T + K]: codebook k holds BOS at steps 0..k - 1, its codes at k..k + T - 1, EOS
        from k + T on."""
        t = check_tokens(tokens, self.sizes)
        k = len(self.sizes)
        steps = t.shape[1] + k
        return delayed(t, range(k), steps, self.BOS, np.full((k, steps), self.EOS, np.int64))

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [K, T] of labels [K, S] (T = S - K); every BOS, EOS and code in its place."""
        a = ints(ids, "ids")
        k = len(self.sizes)
        if a.ndim != 2 or a.shape[0] != k or a.shape[1] < k:
            raise TokenIdError(f"expected Parler labels [{k}, S >= {k}], got shape {a.shape}")
        frames = a.shape[1] - k
        check_pattern(a, self.to_ids(np.zeros((k, frames), np.int64)), CODES)
        values = np.stack([a[c, c : c + frames] for c in range(k)])
        _bad(values, "codebook", lambda c, t: c + t)
        return values


class OuteTtsIds:
    """OuteTTS 1.0: `<|c1_a|><|c2_b|>` a frame, ids from its tokenizer (module docstring)."""

    name = "outetts"
    summary = "OuteTTS 1.0: <|c1_a|><|c2_b|> a frame (DAC.speech), ids from its tokenizer"
    TEMPLATES = ("<|c1_{}|>", "<|c2_{}|>")
    TOKENS = CODES + 1  # each codebook's tokens: codes 0..1023 and 1024 (never a code here)
    PATTERN = re.compile(r"<\|c([12])_(\d+)\|>")
    ids_per_frame = None  # words and features come between frames: read the output whole

    def __init__(self, c1_first: int, c2_first: int):
        self.first = (int(c1_first), int(c2_first))

    @classmethod
    def from_tokenizer(cls, path) -> OuteTtsIds:
        v = Vocab(path)
        return cls(*(v.run(t, cls.TOKENS) for t in cls.TEMPLATES))

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> OuteTtsIds:
        if tuple(codebook_sizes) != (CODES, CODES):
            raise TokenIdError(f"the {cls.name} scheme takes DAC.speech tokens (2 codebooks of "
                               f"{CODES}), got sizes {list(codebook_sizes)}")
        return cls.from_tokenizer(tokenizer)

    def describe(self) -> dict:
        return {"scheme": self.name, "c1_first_id": self.first[0],
                "c2_first_id": self.first[1], "text": "<|c1_a|><|c2_b|> a frame"}

    def to_ids(self, tokens) -> np.ndarray:
        """[2 T] ids: frame by frame, its c1 id then its c2 id."""
        t = check_tokens(tokens, (CODES, CODES))
        return (t + np.array(self.first)[:, None]).T.reshape(-1)

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def _codes(self, c1: list[int], c2: list[int]) -> np.ndarray:
        n = min(len(c1), len(c2))
        return np.array([c1[:n], c2[:n]], dtype=np.int64).reshape(2, n)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [2, t] of a model's output ids: every c1 id and every c2 id in order (other
        ids passed over), both cut to the shorter. A 1024 (the 1025th token) is kept, as
        OuteTTS keeps it; decode refuses it (or clamps it with clamp=True)."""
        a = ints(ids, "ids").reshape(-1)
        lo1, lo2 = self.first
        c1 = a[(a >= lo1) & (a < lo1 + self.TOKENS)] - lo1
        c2 = a[(a >= lo2) & (a < lo2 + self.TOKENS)] - lo2
        return self._codes(c1.tolist(), c2.tolist())

    def to_text(self, tokens) -> str:
        t = check_tokens(tokens, (CODES, CODES))
        return "".join(f"<|c1_{a}|><|c2_{b}|>" for a, b in t.T.tolist())

    def from_text(self, text: str) -> np.ndarray:
        """Tokens [2, t] of a model's output text, as from_ids reads its ids; a c1/c2 token
        past 1024 is not one of the tokenizer's and is refused."""
        if not isinstance(text, str):
            raise TokenIdError(f"expected text, got {type(text).__name__}")
        found = [(int(m[1]), int(m[2])) for m in self.PATTERN.finditer(text)]
        for book, code in found:
            if code >= self.TOKENS:
                raise TokenIdError(f"<|c{book}_{code}|> is not an OuteTTS code token "
                                   f"(0..{self.TOKENS - 1})")
        return self._codes([c for b, c in found if b == 1], [c for b, c in found if b == 2])
