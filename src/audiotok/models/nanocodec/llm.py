"""The token ids of Kani-TTS (nineninesix-ai's kani-tts models and KaniTTS-2 over NanoCodec
0.6 kbps; kani-tts 1.0.1 `kani_tts/core.py`), no tokenizer needed (export/llm.py says what a
scheme is).

`kani-tts`: the text vocabulary's 64 400 ids, then start_of_speech 64 401, end_of_speech
64 402 (and the turn markers 64 403-64 407); audio id = 64 410 + 4032 q + code, frame by frame
in group order q0..q3. A clip is `start_of_speech`, its 4 T ids, `end_of_speech`. Back, as
NemoAudioPlayer.get_nano_codes reads a model's output: the ids between the first
start_of_speech and the first end_of_speech, whole frames of 4, each id minus its group's
offset; a value below 0 or past 4031 is refused with its place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, check_tokens, ints, text_numbers

CODES, GROUPS = 4032, 4
START_OF_SPEECH, END_OF_SPEECH, AUDIO = 64401, 64402, 64410


class KaniIds:
    """Kani-TTS: `start_of_speech`, 64 410 + 4032 q + code frame by frame, `end_of_speech`."""

    name = "kani-tts"
    summary = "Kani-TTS: 64410 + 4032 q + code, 4 a frame, between 64401 and 64402"
    needs_tokenizer = False
    ids_per_frame = None  # framed by the speech markers: read whole
    PATTERN = re.compile(r"<\|kani_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if self.sizes != (CODES,) * GROUPS:
            raise TokenIdError(f"the {self.name} scheme takes NanoCodec 0.6 kbps tokens "
                               f"({GROUPS} codebooks of {CODES}), got sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> KaniIds:
        return cls(codebook_sizes)

    def describe(self) -> dict:
        return {"scheme": self.name, "audio_tokens_start": AUDIO, "per_group": CODES,
                "start_of_speech": START_OF_SPEECH, "end_of_speech": END_OF_SPEECH,
                "order": "frame-major, groups q0..q3"}

    def to_ids(self, tokens) -> np.ndarray:
        """[4 T + 2]: start_of_speech, the frames' ids, end_of_speech."""
        t = check_tokens(tokens, self.sizes)
        ids = (t + AUDIO + CODES * np.arange(GROUPS)[:, None]).T.reshape(-1)
        return np.concatenate([[START_OF_SPEECH], ids, [END_OF_SPEECH]])

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def from_ids(self, ids) -> np.ndarray:
        """Tokens [4, T] of a model's output (the ids between the speech markers) or of bare
        audio ids."""
        a = ints(ids, "ids").reshape(-1)
        starts, ends = np.flatnonzero(a == START_OF_SPEECH), np.flatnonzero(a == END_OF_SPEECH)
        if starts.size or ends.size:
            if not (starts.size and ends.size) or starts[0] >= ends[0]:
                raise TokenIdError(f"no audio between start_of_speech ({START_OF_SPEECH}) and "
                                   f"end_of_speech ({END_OF_SPEECH})")
            a = a[starts[0] + 1 : ends[0]]
        if a.size % GROUPS:
            raise TokenIdError(f"{a.size} audio ids are not whole frames of {GROUPS}")
        values = a.reshape(-1, GROUPS) - CODES * np.arange(GROUPS) - AUDIO
        bad = (values < 0) | (values >= CODES)
        if bad.any():
            t, q = (int(i) for i in np.argwhere(bad)[0])
            raise TokenIdError(f"id {int(a[t * GROUPS + q])} at frame {t}, group {q} is not a "
                               f"Kani-TTS audio id ({AUDIO + q * CODES}.."
                               f"{AUDIO + (q + 1) * CODES - 1})")
        return values.T

    def to_text(self, tokens) -> str:
        return "".join(f"<|kani_{int(i)}|>" for i in self.to_ids(tokens))

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(text_numbers(text, self.PATTERN, "a <|kani_i|> token"))
