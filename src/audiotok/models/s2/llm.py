"""fish-speech S2's token ids: the semantic codebook as the `<|semantic:i|>` tokens of the text
tokenizer (first id read from the tokenizer), and the prompt matrix fish-speech feeds its model:
row 0 the text-vocabulary ids, rows 1..K the raw codes of every codebook (export/llm.py says what
a scheme is)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, Vocab, check_tokens, ints, outside, parse_text

S2_PRO_SIZES = (4096,) + (1024,) * 9


class FishS2Ids:
    """fish-speech S2: `<|semantic:i|>` ids for the semantic codebook; the prompt matrix."""

    name = "fish-s2"
    summary = "fish-speech: <|semantic:i|> ids of the semantic codebook"
    TEMPLATE = "<|semantic:{}|>"
    PATTERN = re.compile(r"<\|semantic:(\d+)\|>")

    def __init__(self, semantic_begin_id: int, codebook_sizes: Sequence[int] = S2_PRO_SIZES):
        self.begin = int(semantic_begin_id)
        self.sizes = tuple(int(s) for s in codebook_sizes)

    @classmethod
    def from_tokenizer(cls, path, codebook_sizes: Sequence[int] = S2_PRO_SIZES):
        return cls(Vocab(path).run(cls.TEMPLATE, codebook_sizes[0]), codebook_sizes)

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> FishS2Ids:
        return cls.from_tokenizer(tokenizer, codebook_sizes)

    @property
    def end(self) -> int:
        return self.begin + self.sizes[0]

    def describe(self) -> dict:
        return {"scheme": self.name, "semantic_begin_id": self.begin}

    def sequence(self, tokens) -> np.ndarray:
        """The ids a training row holds: the semantic ids (row 0 of the prompt matrix; the
        other rows are the codes themselves)."""
        return self.semantic_ids(tokens)

    def semantic_ids(self, tokens) -> np.ndarray:
        """[T] text-vocabulary ids of the semantic codebook."""
        return check_tokens(tokens, self.sizes)[0] + self.begin

    def to_ids(self, tokens) -> np.ndarray:
        """The prompt matrix [K + 1, T]: row 0 `semantic_begin_id + code0`, rows 1..K the raw
        codes of every codebook (the semantic codebook again, then the residuals)."""
        t = check_tokens(tokens, self.sizes)
        return np.concatenate([t[:1] + self.begin, t])

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [K, T] of a prompt matrix [K + 1, T]; or, from semantic ids [T] alone, the
        semantic codebook [1, T]."""
        a = ints(ids, "ids")
        if a.ndim == 1:
            outside(a, self.begin, self.end, "a <|semantic:i|> token")
            return (a - self.begin)[None]
        if a.ndim != 2 or a.shape[0] != len(self.sizes) + 1:
            raise TokenIdError(f"expected a prompt matrix [{len(self.sizes) + 1}, T] or semantic "
                               f"ids [T], got shape {a.shape}")
        outside(a[0], self.begin, self.end, "a <|semantic:i|> token")
        tokens = check_tokens(a[1:], self.sizes)
        if not np.array_equal(a[0] - self.begin, tokens[0]):
            f = int(np.argmax(a[0] - self.begin != tokens[0]))
            raise TokenIdError(f"row 0 and row 1 disagree at frame {f}: semantic id "
                               f"{int(a[0, f])} is code {int(a[0, f]) - self.begin}, row 1 says "
                               f"{int(tokens[0, f])}")
        return tokens

    def to_text(self, tokens) -> str:
        return "".join(self.TEMPLATE.format(int(c)) for c in check_tokens(tokens, self.sizes)[0])

    def from_text(self, text: str) -> np.ndarray:
        """Semantic codes [1, T] of `<|semantic:i|>` text."""
        codes = [int(self.PATTERN.fullmatch(t).group(1))
                 for t in parse_text(text, self.PATTERN, "a <|semantic:i|> token")]
        a = np.asarray(codes, dtype=np.int64)
        outside(a, 0, self.sizes[0], "a semantic code")
        return a[None]
