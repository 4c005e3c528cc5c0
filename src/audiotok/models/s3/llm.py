"""The token ids of the language models trained on S3 tokens (export/llm.py says what a scheme
is). None needs a tokenizer: each speech id is the code plus an offset, with the model's own
start and end ids (shared/specs/s3_tokenizer.md, section 6).

- `cosyvoice`: CosyVoice 1 (v1 or v1_25hz codes): `speech_embedding` rows 0..4095 are the
  codes; 4096 ends the speech (sos and the task id sit in a separate table, not here).
- `cosyvoice2`: CosyVoice 2 (v2): codes 0..6560; 6561 ends the speech; 6562 and 6563 (the fill
  token) also stop generation.
- `cosyvoice3`: Fun-CosyVoice 3 (v3): sos 6561, codes, eos 6562 (task id 6563, fill 6564; any
  id 6561..6760 stops generation).
- `chatterbox`: Chatterbox's T3 speech table: start 6561, codes, stop 6562.
- `step-audio2`: Step-Audio 2: id = 151696 + code; ids from 151696 + 6561 on are audio padding,
  dropped when ids are read back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, check_tokens, ints, outside, text_numbers


class _S3Ids:
    name = ""
    summary = ""
    needs_tokenizer = False
    SIZE = 6561  # codes
    OFFSET = 0  # id of code 0
    START: int | None = None  # the id before the speech, if the model has one
    END: int | None = None  # the id after it
    STOPS: range = range(0)  # ids that end the speech when ids are read back
    PADDING_FROM: int | None = None  # ids from this one on are dropped when read back

    def __init__(self, codebook_sizes: Sequence[int]):
        if tuple(codebook_sizes) != (self.SIZE,):
            raise TokenIdError(f"the {self.name} scheme is for one codebook of {self.SIZE} S3 "
                               f"codes, got sizes {list(codebook_sizes)}")
        self.pattern = re.compile(rf"<\|{re.escape(self.name)}_(\d+)\|>")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    def describe(self) -> dict:
        return {"scheme": self.name, "codebook_size": self.SIZE, "offset": self.OFFSET,
                "start_id": self.START, "end_id": self.END}

    def sequence(self, tokens) -> np.ndarray:
        """The ids a training row holds: start id (if any), speech ids, end id (if any)."""
        return self.to_ids(tokens)

    def to_ids(self, tokens, markers: bool = True) -> np.ndarray:
        ids = check_tokens(tokens, (self.SIZE,))[0] + self.OFFSET
        if not markers:
            return ids
        return np.concatenate([[self.START] if self.START is not None else [], ids,
                               [self.END] if self.END is not None else []]).astype(np.int64)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [1, T] of ids: a leading start id dropped, everything from the first stop id
        on dropped (a sequence cut before its end is accepted), padding ids dropped."""
        a = ints(ids, "ids")
        if a.ndim != 1:
            raise TokenIdError(f"expected ids [N], got shape {a.shape}")
        if a.size and self.START is not None and a[0] == self.START:
            a = a[1:]
        stops = np.flatnonzero(np.isin(a, self.STOPS))
        if stops.size:
            a = a[: stops[0]]
        if self.PADDING_FROM is not None:
            a = a[a < self.PADDING_FROM]
        outside(a, self.OFFSET, self.OFFSET + self.SIZE, f"a {self.name} speech id")
        return (a - self.OFFSET)[None]

    # read as they come (export.llm.IdReader: a server's decode stream of an LLM's ids)
    @property
    def ids_per_frame(self) -> int | None:
        """1 (one code a frame); None where padding ids, of no bounded range, may come."""
        return None if self.PADDING_FROM is not None else 1

    def slot_ids(self, k: int) -> tuple[int, int]:
        return self.OFFSET, self.OFFSET + self.SIZE

    @property
    def skip_ids(self) -> tuple[int, ...]:
        return () if self.START is None else (self.START,)

    @property
    def end_ids(self) -> tuple[int, ...]:
        return tuple(i for i in self.STOPS if i != self.START)

    def to_text(self, tokens) -> str:
        return "".join(f"<|{self.name}_{int(i)}|>" for i in self.sequence(tokens))

    def text_ids(self, text: str) -> np.ndarray:
        """The ids of a text form, not yet read as speech."""
        return text_numbers(text, self.pattern, f"a <|{self.name}_i|> token")

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(self.text_ids(text))


class CosyVoiceIds(_S3Ids):
    name = "cosyvoice"
    summary = "CosyVoice 1: the v1 codes as ids, 4096 ends the speech"
    SIZE = 4096
    END = 4096
    STOPS = range(4096, 4097)


class CosyVoice2Ids(_S3Ids):
    name = "cosyvoice2"
    summary = "CosyVoice 2: the v2 codes as ids, 6561 ends (6561..6563 stop)"
    END = 6561
    STOPS = range(6561, 6564)


class CosyVoice3Ids(_S3Ids):
    name = "cosyvoice3"
    summary = "Fun-CosyVoice 3: sos 6561, the v3 codes, eos 6562 (6561..6760 stop)"
    START, END = 6561, 6562
    STOPS = range(6561, 6761)


class ChatterboxIds(_S3Ids):
    name = "chatterbox"
    summary = "Chatterbox T3: start 6561, the v2 codes, stop 6562"
    START, END = 6561, 6562
    STOPS = range(6561, 6563)


class StepAudio2Ids(_S3Ids):
    name = "step-audio2"
    summary = "Step-Audio 2: id = 151696 + code; ids past 151696 + 6560 are padding"
    OFFSET = 151696
    PADDING_FROM = 151696 + 6561
