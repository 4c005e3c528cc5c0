"""The token ids of the Qwen3-TTS 12 Hz talkers (export/llm.py says what a scheme is).

`qwen3-tts` (qwen-tts 0.1.1 `core/models/modeling_qwen3_tts.py`: the talker's `codec_head`
and `codec_embedding`, the code predictor's 15 heads, and `generate`, which stacks each step's
16 codes and cuts each item at the first end-of-speech id in codebook 0): per 12.5 Hz step the
talker predicts codebook 0 in its codec vocabulary of 3072 (ids 0-2047 are the codes; its
special ids lie in 2048-3071: in the released talker configs pad 2148, bos 2149, eos 2150),
and the code predictor codebooks 1-15, each its own table of 2048 (raw codes). A step is a
row of 16 ids; the audio ends with a row whose first id is the end of speech (2150; the code
predictor's columns of that row are not codes and are written as 0).
"""

from __future__ import annotations

import numpy as np

from ...export.llm import TokenIdError, check_tokens, ints, outside
from ..mimi.llm import CARD, _ArithmeticIds

VOCAB = 3072  # the talker's codec vocabulary
PAD, BOS, EOS = 2148, 2149, 2150  # the released talker configs' codec_pad/bos/eos ids


class Qwen3TtsIds(_ArithmeticIds):
    """[T + 1, 16] ids: frame t's codes (codebook 0 in the talker's vocabulary, where a code is
    its own id; codebooks 1-15 the code predictor's), then the end-of-speech row."""

    name = "qwen3-tts"
    summary = "Qwen3-TTS talker: 16 ids a step (codebook 0 in its vocabulary of 3072), EOS 2150"
    PREFIX = "qwen3tts"
    max_codebooks = 16

    def __init__(self, codebook_sizes):
        super().__init__(codebook_sizes)
        if self.k != 16:
            raise TokenIdError(f"the Qwen3-TTS talkers take 16 codebooks, got {self.k}")

    def describe(self) -> dict:
        return {"scheme": self.name, "talker_vocab": VOCAB, "codes": [0, CARD - 1],
                "pad_id": PAD, "bos_id": BOS, "eos_id": EOS,
                "predictor_codebooks": self.k - 1}

    def to_ids(self, tokens) -> np.ndarray:
        """[T + 1, 16]: row t is frame t's 16 codes; the last row [2150, 0, ..., 0] ends the
        speech."""
        t = check_tokens(tokens, self.sizes)
        end = np.zeros((self.k, 1), np.int64)
        end[0, 0] = EOS
        return np.concatenate([t, end], axis=1).T

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [16, T] of rows [S, 16]: the rows before the first end of speech in column 0
        (all of them if none, as the reference's generate cuts them); a talker special id (or
        any id past 3071) in column 0, or a predictor id outside 0-2047, is refused."""
        a = ints(ids, "ids")
        if a.ndim != 2 or a.shape[1] != self.k:
            raise TokenIdError(f"expected Qwen3-TTS rows [S, {self.k}], got shape {a.shape}")
        stops = np.flatnonzero(a[:, 0] == EOS)
        a = a[: stops[0]] if stops.size else a
        outside(a[:, 0], 0, CARD, "a codebook-0 code (talker ids 2048-3071 are special)")
        for k in range(1, self.k):
            outside(a[:, k], 0, CARD, f"a code of codebook {k}")
        return a.T

    def _from_sequence(self, ids: np.ndarray) -> np.ndarray:
        if ids.size % self.k:
            raise TokenIdError(f"{ids.size} ids are not whole steps of {self.k} codebooks")
        return self.from_ids(ids.reshape(-1, self.k))
