"""The token ids of the language models that use SNAC 24 kHz (export/llm.py says what a scheme
is). Neither needs a tokenizer: their audio ids are arithmetic on the codes.

- `orpheus`: Orpheus TTS (canopyai/Orpheus-TTS; Maya1, Veena and Svara-TTS use the same ids):
  7 ids per coarse frame, slot k of a frame holding id 128266 + 4096 k + code, the slots in the
  order level 0 [i], level 1 [2i], level 2 [4i], [4i+1], level 1 [2i+1], level 2 [4i+2], [4i+3]
  (the Orpheus notebooks' `tokenise_audio`, `orpheus_tts/decoder.py`); as text
  `<custom_token_N>` with N = id - 128256 (the tokens appended to the Llama-3 vocabulary).
- `mini-omni`: Mini-Omni (gpt-omni/mini-omni): 7 parallel audio heads in the same slot order,
  head j's id = value + 152000 + 4160 j (`utils/snac_utils.py` `layershift`), head j one step
  later per head (delay j + 1: `reconscruct_snac` drops j + 1 leading tokens of head j); the
  heads' filler is the audio pad 4097 and each head ends with the end of audio 4096
  (`inference.py`: `_pad_a`, `_eoa`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, check_tokens, ints, outside, parse_text

CODES = 4096
SLOTS = 7
# slot k of a frame holds token row ROWS_OF_SLOT[k] ([B, 7, T] rows: level 0, level 1 at 2i and
# 2i + 1, level 2 at 4i..4i + 3)
ROWS_OF_SLOT = (0, 1, 3, 4, 2, 5, 6)


class _Snac24Ids:
    """Shared: no tokenizer; SNAC 24 kHz's 7 rows of 4096 codes."""

    name = ""
    summary = ""
    needs_tokenizer = False

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if self.sizes != (CODES,) * SLOTS:
            raise TokenIdError(f"the {self.name} scheme takes SNAC 24 kHz tokens (7 rows of "
                               f"{CODES} codes), got sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    @staticmethod
    def slots(tokens: np.ndarray) -> np.ndarray:
        """Tokens [7, T] -> codes [T, 7] in slot order."""
        return tokens[list(ROWS_OF_SLOT)].T

    @staticmethod
    def rows(slots: np.ndarray) -> np.ndarray:
        """Codes [T, 7] in slot order -> tokens [7, T]."""
        tokens = np.empty((SLOTS, slots.shape[0]), np.int64)
        tokens[list(ROWS_OF_SLOT)] = slots.T
        return tokens


class OrpheusIds(_Snac24Ids):
    """Orpheus TTS: 7 ids per frame, id = 128266 + 4096 slot + code."""

    name = "orpheus"
    summary = "Orpheus TTS (and Maya1, Veena, Svara): 7 ids a frame, 128266 + 4096 slot + code"
    FIRST = 128266  # <custom_token_10>: slot 0, code 0
    CUSTOM = 128256  # the id of <custom_token_0>
    START_OF_SPEECH, END_OF_SPEECH = 128257, 128258
    PATTERN = re.compile(r"<custom_token_(\d+)>")
    TOKEN = re.compile(r"<[^<>]*>")  # any <...> token in Orpheus's text
    ids_per_frame = SLOTS  # frames one after another: read as they come (export.llm.IdReader)
    skip_ids, end_ids = (START_OF_SPEECH,), (END_OF_SPEECH,)

    def describe(self) -> dict:
        return {"scheme": self.name, "first_audio_id": self.FIRST, "ids_per_slot": CODES,
                "slot_rows": list(ROWS_OF_SLOT), "start_of_speech": self.START_OF_SPEECH,
                "end_of_speech": self.END_OF_SPEECH,
                "text": "<custom_token_N>, N = id - 128256"}

    def to_ids(self, tokens) -> np.ndarray:
        """[7 T] ids, frame by frame, the slots of each frame in Orpheus's order."""
        slots = self.slots(check_tokens(tokens, self.sizes))
        return (slots + self.FIRST + CODES * np.arange(SLOTS)).reshape(-1)

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [7, T] of 7 T audio ids (whole frames; each id in its slot's range, a code 0
        included; start/end-of-speech and text ids are refused)."""
        a = ints(ids, "ids").reshape(-1)
        if a.size % SLOTS:
            raise TokenIdError(f"{a.size} Orpheus ids are not whole frames of {SLOTS}")
        frames = a.reshape(-1, SLOTS)
        for k in range(SLOTS):
            lo = self.FIRST + CODES * k
            outside(frames[:, k], lo, lo + CODES, f"an audio id of slot {k}")
        return self.rows(frames - self.FIRST - CODES * np.arange(SLOTS))

    def slot_ids(self, k: int) -> tuple[int, int]:
        """The ids [lo, hi) of slot k of a frame."""
        return self.FIRST + CODES * k, self.FIRST + CODES * (k + 1)

    def to_text(self, tokens) -> str:
        return "".join(f"<custom_token_{int(i) - self.CUSTOM}>" for i in self.to_ids(tokens))

    def text_ids(self, text: str) -> np.ndarray:
        """The ids of `<custom_token_N>` text, not yet framed."""
        tokens = parse_text(text, self.PATTERN, "a <custom_token_N> token", token=self.TOKEN)
        return np.asarray([int(self.PATTERN.fullmatch(t).group(1)) + self.CUSTOM
                           for t in tokens], dtype=np.int64)

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(self.text_ids(text))


class MiniOmniIds(_Snac24Ids):
    """Mini-Omni: 7 parallel heads [7, T + 8], head j delayed j + 1 steps, id = value + 152000
    + 4160 j; pad 4097 before and after, end of audio 4096 after each head's codes."""

    name = "mini-omni"
    summary = "Mini-Omni: 7 parallel heads, head j delayed j + 1, id = value + 152000 + 4160 j"
    SHIFT, STRIDE = 152000, 4160
    EOA, PAD = CODES, CODES + 1
    PATTERN = re.compile(r"<\|mini_omni_(\d+)\|>")
    ids_per_frame = None  # the heads are delayed: not read frame by frame

    def describe(self) -> dict:
        return {"scheme": self.name, "shift": self.SHIFT, "ids_per_head": self.STRIDE,
                "delays": [j + 1 for j in range(SLOTS)], "slot_rows": list(ROWS_OF_SLOT),
                "end_of_audio": self.EOA, "pad": self.PAD}

    def to_ids(self, tokens) -> np.ndarray:
        """[7, T + 8]: head j holds the pad at steps 0..j, its slot's codes at j + 1..j + T,
        the end of audio at j + T + 1, then the pad; each value shifted to head j's range."""
        slots = self.slots(check_tokens(tokens, self.sizes))
        t = slots.shape[0]
        out = np.full((SLOTS, t + SLOTS + 1), self.PAD, np.int64)
        for j in range(SLOTS):
            out[j, j + 1 : j + 1 + t] = slots[:, j]
            out[j, j + 1 + t] = self.EOA
        return out + (self.SHIFT + self.STRIDE * np.arange(SLOTS))[:, None]

    def sequence(self, tokens) -> np.ndarray:
        """The heads step by step (step 0 of heads 0..6, then step 1, ...)."""
        return self.to_ids(tokens).T.reshape(-1)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [7, T] of heads [7, S]: head j's codes are its steps j + 1.. (as
        `reconscruct_snac` takes them), T = S - 7, less one when the last head ends with the
        end of audio; every code must be in its head's range."""
        a = ints(ids, "ids")
        if a.ndim != 2 or a.shape[0] != SLOTS or a.shape[1] < SLOTS:
            raise TokenIdError(f"expected Mini-Omni heads [{SLOTS}, S >= {SLOTS}], got shape "
                               f"{a.shape}")
        values = a - (self.SHIFT + self.STRIDE * np.arange(SLOTS))[:, None]
        t = a.shape[1] - SLOTS - int(values[-1, -1] == self.EOA)
        slots = np.stack([values[j, j + 1 : j + 1 + t] for j in range(SLOTS)], 1)
        for j in range(SLOTS):
            lo = self.SHIFT + self.STRIDE * j
            outside(slots[:, j] + lo, lo, lo + CODES, f"a code of head {j}")
        return self.rows(slots)

    def to_text(self, tokens) -> str:
        return "".join(f"<|mini_omni_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        ids = [int(self.PATTERN.fullmatch(t).group(1))
               for t in parse_text(text, self.PATTERN, "a <|mini_omni_i|> token")]
        a = np.asarray(ids, dtype=np.int64)
        if a.size % SLOTS:
            raise TokenIdError(f"{a.size} ids are not whole steps of {SLOTS} heads")
        return self.from_ids(a.reshape(-1, SLOTS).T)
