"""Llasa's token ids for X-Codec2: `<|s_i|>` tokens framed by `<|SPEECH_GENERATION_START|>` and
`<|SPEECH_GENERATION_END|>`, ids read from the tokenizer (export/llm.py says what a scheme is)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, Vocab, check_tokens, ints, outside, parse_text


class LlasaIds:
    """Llasa: `<|s_i|>` ids framed by the speech generation start and end markers."""

    name = "llasa"
    summary = "Llasa: <|s_i|> ids framed by the speech start/end markers"
    TEMPLATE = "<|s_{}|>"
    PATTERN = re.compile(r"<\|s_(\d+)\|>")
    WHAT = "an <|s_i|> token"
    START, END = "<|SPEECH_GENERATION_START|>", "<|SPEECH_GENERATION_END|>"

    def __init__(self, s_begin_id: int, start_id: int, end_id: int, codebook_size: int = 65536):
        self.begin, self.start, self.stop = int(s_begin_id), int(start_id), int(end_id)
        self.size = int(codebook_size)

    @classmethod
    def from_tokenizer(cls, path, codebook_size: int = 65536):
        v = Vocab(path)
        return cls(v.run(cls.TEMPLATE, codebook_size), v.need(cls.START), v.need(cls.END),
                   codebook_size)

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> LlasaIds:
        if len(codebook_sizes) != 1:
            raise TokenIdError(f"the {cls.name} scheme is for one codebook, not "
                               f"{len(codebook_sizes)}")
        return cls.from_tokenizer(tokenizer, codebook_sizes[0])

    def describe(self) -> dict:
        return {"scheme": self.name, "s_begin_id": self.begin, "start_id": self.start,
                "end_id": self.stop}

    def sequence(self, tokens) -> np.ndarray:
        """The ids a training row holds: start marker, speech ids, end marker."""
        return self.to_ids(tokens)

    def to_ids(self, tokens, markers: bool = True) -> np.ndarray:
        """[T (+ 2)] ids: start marker, `<|s_code|>` per frame, end marker."""
        ids = check_tokens(tokens, (self.size,))[0] + self.begin
        return np.concatenate([[self.start], ids, [self.stop]]) if markers else ids

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [1, T] of ids, with or without the markers (a sequence cut before its end
        marker is accepted)."""
        a = ints(ids, "ids")
        if a.ndim != 1:
            raise TokenIdError(f"expected ids [N], got shape {a.shape}")
        if a.size and a[0] == self.start:
            a = a[1:]
        if a.size and a[-1] == self.stop:
            a = a[:-1]
        outside(a, self.begin, self.begin + self.size, self.WHAT)
        return (a - self.begin)[None]

    def to_text(self, tokens, markers: bool = True) -> str:
        body = "".join(self.TEMPLATE.format(int(c))
                       for c in check_tokens(tokens, (self.size,))[0])
        return f"{self.START}{body}{self.END}" if markers else body

    def from_text(self, text: str) -> np.ndarray:
        text = text.strip()
        text = text.removeprefix(self.START).removesuffix(self.END)
        codes = [int(self.PATTERN.fullmatch(t).group(1))
                 for t in parse_text(text, self.PATTERN, self.WHAT)]
        a = np.asarray(codes, dtype=np.int64)
        outside(a, 0, self.size, "a speech code")
        return a[None]
