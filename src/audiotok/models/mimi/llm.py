"""The token ids of the language models that use Mimi (export/llm.py says what a scheme is).
None needs a tokenizer: their audio ids are arithmetic on the codes.

- `csm`: Sesame CSM-1B (SesameAILabs/csm `models.py` audio_embeddings, `generator.py`): one
  audio embedding table of 32 x 2051 rows, id = code + 2051 k for codebook k; a frame of 32
  ids per 12.5 Hz step, each segment followed by an all-zero frame (code 0 in every codebook)
  that ends its audio (generation stops on one).
- `kyutai-stt`: transformers' KyutaiSpeechToText input ids (`modeling_kyutai_speech_to_text`):
  audio column k holds code + 4001 + 2049 k (text vocabulary 4001, 2049 rows per codebook:
  2048 codes and the audio BOS 2048); 69569 is the padding id.
- `moshi`: Moshi's audio streams (moshi `lm.py`, `lm_utils._delay_sequence`): one stream per
  codebook, raw codes, the acoustic codebooks one step late, the gap filled with the initial
  token 2048.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, check_tokens, ints, outside, parse_text

CARD = 2048  # codes per codebook; moshi's initial token and the STT audio BOS


class _ArithmeticIds:
    """Shared: no tokenizer, every codebook 2048 codes, text form `<|PREFIX_ID|>` over the
    flat `sequence` ids."""

    name = ""
    summary = ""
    PREFIX = ""
    needs_tokenizer = False
    max_codebooks = 32
    codebook_rows = False  # to_ids gives [K, steps] (True) or [steps, K] (False)

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if not 1 <= len(self.sizes) <= self.max_codebooks or set(self.sizes) != {CARD}:
            raise TokenIdError(f"the {self.name} scheme takes 1..{self.max_codebooks} Mimi "
                               f"codebooks of {CARD}, got sizes {list(self.sizes)}")
        self.pattern = re.compile(rf"<\|{self.PREFIX}_(\d+)\|>")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    @property
    def k(self) -> int:
        return len(self.sizes)

    def sequence(self, tokens) -> np.ndarray:
        """The ids a training row holds: to_ids flattened step by step."""
        m = self.to_ids(tokens)
        return (m.T if self.codebook_rows else m).reshape(-1)

    def _from_sequence(self, ids: np.ndarray) -> np.ndarray:
        if ids.size % self.k:
            raise TokenIdError(f"{ids.size} ids are not whole steps of {self.k} codebooks")
        m = ids.reshape(-1, self.k)
        return self.from_ids(m.T if self.codebook_rows else m)

    def to_text(self, tokens) -> str:
        return "".join(f"<|{self.PREFIX}_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        ids = [int(self.pattern.fullmatch(t).group(1))
               for t in parse_text(text, self.pattern, f"a <|{self.PREFIX}_i|> token")]
        return self._from_sequence(np.asarray(ids, dtype=np.int64))


class CsmIds(_ArithmeticIds):
    """Sesame CSM-1B: [T + 1, 32] ids, id = code + 2051 k, then the all-zero end frame."""

    name = "csm"
    summary = "Sesame CSM: id = code + 2051 k, an all-zero frame ends the audio"
    PREFIX = "csm"
    ROWS = 2051  # per codebook in CSM's audio embedding table (2048 codes + 3 unused)

    def __init__(self, codebook_sizes: Sequence[int]):
        super().__init__(codebook_sizes)
        if self.k != 32:
            raise TokenIdError(f"CSM uses all 32 Mimi codebooks, got {self.k} (load the codec "
                               "with codebooks=32)")
        self.offsets = self.ROWS * np.arange(self.k)

    def describe(self) -> dict:
        return {"scheme": self.name, "rows_per_codebook": self.ROWS, "end_frame": "all zero"}

    def to_ids(self, tokens) -> np.ndarray:
        """[T + 1, 32]: frame t holds code + 2051 k in column k; the last frame is the end of
        audio (code 0 in every codebook)."""
        t = check_tokens(tokens, self.sizes)
        t = np.concatenate([t, np.zeros((self.k, 1), np.int64)], axis=1)
        return (t + self.offsets[:, None]).T

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [32, T] of frames [S, 32]; a last all-zero frame (the end of audio) is
        dropped."""
        a = ints(ids, "ids")
        if a.ndim != 2 or a.shape[1] != self.k:
            raise TokenIdError(f"expected CSM frames [S, {self.k}], got shape {a.shape}")
        codes = a - self.offsets[None, :]
        for k in range(self.k):
            outside(a[:, k], self.offsets[k], self.offsets[k] + CARD,
                    f"a code of codebook {k}")
        if codes.shape[0] and not codes[-1].any():
            codes = codes[:-1]
        return codes.T


class KyutaiSttIds(_ArithmeticIds):
    """transformers' Kyutai STT audio columns: [T, K] ids, code + 4001 + 2049 k."""

    name = "kyutai-stt"
    summary = "Kyutai STT (transformers): id = code + 4001 + 2049 k"
    PREFIX = "stt"
    TEXT_VOCAB = 4001
    ROWS = CARD + 1  # 2048 codes and the audio BOS
    PAD = TEXT_VOCAB + 32 * ROWS  # 69569

    def __init__(self, codebook_sizes: Sequence[int]):
        super().__init__(codebook_sizes)
        self.offsets = self.TEXT_VOCAB + self.ROWS * np.arange(self.k)

    def describe(self) -> dict:
        return {"scheme": self.name, "first_audio_id": self.TEXT_VOCAB,
                "rows_per_codebook": self.ROWS, "audio_bos_code": CARD, "pad_id": self.PAD}

    def to_ids(self, tokens) -> np.ndarray:
        """[T, K]: column k of frame t is code + 4001 + 2049 k."""
        return (check_tokens(tokens, self.sizes) + self.offsets[:, None]).T

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [K, T] of audio columns [T, K]; the audio BOS, padding and text ids are not
        codes and are refused."""
        a = ints(ids, "ids")
        if a.ndim != 2 or a.shape[1] != self.k:
            raise TokenIdError(f"expected Kyutai STT audio columns [T, {self.k}], got shape "
                               f"{a.shape}")
        for k in range(self.k):
            outside(a[:, k], self.offsets[k], self.offsets[k] + CARD,
                    f"a code of codebook {k}")
        return (a - self.offsets[None, :]).T


class MoshiIds(_ArithmeticIds):
    """Moshi's audio streams: [K, T + 1], raw codes, acoustic codebooks one step late."""

    name = "moshi"
    summary = "Moshi: a stream per codebook, acoustic codebooks delayed one step (2048 fills)"
    PREFIX = "moshi"
    codebook_rows = True
    INITIAL = CARD

    def describe(self) -> dict:
        return {"scheme": self.name, "delays": [0] + [1] * (self.k - 1),
                "initial_token": self.INITIAL}

    def to_ids(self, tokens) -> np.ndarray:
        """[K, T + 1]: codebook 0 at steps 0..T-1, codebooks 1.. at steps 1..T; the initial
        token 2048 fills step 0 of the delayed rows and step T of codebook 0 (moshi's
        `_delay_sequence` over the codes and one more frame of initial tokens)."""
        t = check_tokens(tokens, self.sizes)
        out = np.full((self.k, t.shape[1] + 1), self.INITIAL, np.int64)
        out[0, :-1] = t[0]
        out[1:, 1:] = t[1:]
        return out

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [K, S - 1] of streams [K, S]; the delayed rows must start with the initial
        token; the last step of codebook 0 (the next frame's, or the initial token) is not
        part of these frames."""
        a = ints(ids, "ids")
        if a.ndim != 2 or a.shape[0] != self.k or a.shape[1] < 1:
            raise TokenIdError(f"expected Moshi streams [{self.k}, S], got shape {a.shape}")
        if self.k > 1 and (a[1:, 0] != self.INITIAL).any():
            k = 1 + int(np.argmax(a[1:, 0] != self.INITIAL))
            raise TokenIdError(f"delayed codebook {k} starts with {int(a[k, 0])}, not the "
                               f"initial token {self.INITIAL}")
        outside(a[0, -1:], 0, CARD + 1, "a code or the initial token")
        tokens = np.concatenate([a[:1, :-1], a[1:, 1:]])
        for k in range(self.k):
            outside(tokens[k], 0, CARD, f"a code of codebook {k}")
        return tokens
