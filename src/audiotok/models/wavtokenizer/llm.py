"""The token ids of the language models that use WavTokenizer (export/llm.py says what a
scheme is).

- `outetts-v2`: OuteTTS 0.2 and 0.3 (outetts 0.4.4's prompt format v2:
  `version/v2/tokens.py`, `prompt_processor.py`): a frame is one text token `<|N|>`, 4100 of
  them (codes 0..4095 and four more), their ids looked up in the model's tokenizer. The model's
  output interleaves the codes with words and their durations (`hello<|t_0.32|><|12|>...
  <|space|>`); back to codes, as `extract_audio_from_tokens` does, every code id in order,
  anything else passed over.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, Vocab, check_tokens, ints

CODES = 4096


class OuteTtsV2Ids:
    """OuteTTS 0.2/0.3: `<|N|>` a frame, ids from its tokenizer (module docstring)."""

    name = "outetts-v2"
    summary = "OuteTTS 0.2/0.3: <|N|> a frame (WavTokenizer 75 Hz), ids from its tokenizer"
    TEMPLATE = "<|{}|>"
    TOKENS = 4100  # the tokens OuteTTS maps to codes: 0..4095 and four more (never a code here)
    PATTERN = re.compile(r"<\|(\d+)\|>")
    ids_per_frame = 1

    def __init__(self, ids: Sequence[int]):
        """ids[n]: the id of `<|n|>`, n < 4100 (not necessarily consecutive)."""
        self.ids = np.asarray(ids, dtype=np.int64)
        self.code_of = {int(i): n for n, i in enumerate(self.ids)}

    @classmethod
    def from_tokenizer(cls, path) -> OuteTtsV2Ids:
        v = Vocab(path)
        return cls([v.need(cls.TEMPLATE.format(n)) for n in range(cls.TOKENS)])

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> OuteTtsV2Ids:
        if tuple(codebook_sizes) != (CODES,):
            raise TokenIdError(f"the {cls.name} scheme takes WavTokenizer tokens (1 codebook of "
                               f"{CODES}), got sizes {list(codebook_sizes)}")
        return cls.from_tokenizer(tokenizer)

    def describe(self) -> dict:
        return {"scheme": self.name, "code_0_id": int(self.ids[0]), "text": "<|N|> a frame"}

    def to_ids(self, tokens) -> np.ndarray:
        """[T] ids, frame by frame."""
        return self.ids[check_tokens(tokens, (CODES,))[0]]

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [1, t] of a model's output ids: every code id in order, other ids passed over.
        4096..4099 are kept, as OuteTTS keeps them; decode refuses them (or clamps them with
        clamp=True)."""
        codes = [self.code_of[i] for i in ints(ids, "ids").reshape(-1).tolist()
                 if i in self.code_of]
        return np.array(codes, dtype=np.int64).reshape(1, -1)

    def to_text(self, tokens) -> str:
        return "".join(self.TEMPLATE.format(c) for c in check_tokens(tokens, (CODES,))[0])

    def from_text(self, text: str) -> np.ndarray:
        """Tokens [1, t] of a model's output text, as from_ids reads its ids; `<|N|>` past 4099
        is not one of the tokenizer's and is refused."""
        if not isinstance(text, str):
            raise TokenIdError(f"expected text, got {type(text).__name__}")
        codes = [int(m[1]) for m in self.PATTERN.finditer(text)]
        for c in codes:
            if c >= self.TOKENS:
                raise TokenIdError(f"<|{c}|> is not an OuteTTS code token "
                                   f"(0..{self.TOKENS - 1})")
        return np.array(codes, dtype=np.int64).reshape(1, -1)
