"""The token ids of Spark-TTS (export/llm.py says what a scheme is).

`spark-tts`: text tokens `<|bicodec_global_N|>` (N < 4096) and `<|bicodec_semantic_N|>`
(N < 8192) added to Spark's Qwen2.5 tokenizer, their ids looked up there one by one (not
assumed consecutive). An utterance's 32 global tokens come first, then its semantic tokens:
Spark's prompt holds `<|start_global_token|>` globals `<|end_global_token|>`
`<|start_semantic_token|>` semantic tokens (`sequence`, a training row's speech part, closes
with `<|end_semantic_token|>`). Back, as Spark-TTS reads a model's output (its regexes over
the decoded text): every semantic token in order, every global token in order, anything else
passed over.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...export.llm import TokenIdError, Vocab, check_tokens, ints

SEMANTIC, GLOBAL, GLOBALS = 8192, 4096, 32
MARKERS = ("<|start_global_token|>", "<|end_global_token|>", "<|start_semantic_token|>",
           "<|end_semantic_token|>")


class SparkTtsIds:
    """Spark-TTS: `<|bicodec_global_N|>` x 32, then `<|bicodec_semantic_N|>` a frame."""

    name = "spark-tts"
    summary = ("Spark-TTS: <|bicodec_global_N|> x 32 then <|bicodec_semantic_N|> a frame "
               "(BiCodec), ids from its tokenizer")
    utterance_tokens = GLOBALS  # the scheme carries Codes.globals too
    ids_per_frame = None  # global ids precede the frames: read whole
    TOKEN = re.compile(r"<\|bicodec_(global|semantic)_(\d+)\|>")

    def __init__(self, semantic: Sequence[int], globals_: Sequence[int], markers: Sequence[int]):
        """semantic[n], globals_[n]: the ids of `<|bicodec_semantic_n|>` and
        `<|bicodec_global_n|>`; markers: those of MARKERS."""
        self.semantic = np.asarray(semantic, dtype=np.int64)
        self.globals = np.asarray(globals_, dtype=np.int64)
        self.markers = np.asarray(markers, dtype=np.int64)
        self.kind = {int(i): ("semantic", n) for n, i in enumerate(self.semantic)}
        self.kind.update({int(i): ("global", n) for n, i in enumerate(self.globals)})
        self.by_text = {f"<|bicodec_semantic_{n}|>": int(i) for n, i in enumerate(self.semantic)}
        self.by_text.update({f"<|bicodec_global_{n}|>": int(i)
                             for n, i in enumerate(self.globals)})

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> SparkTtsIds:
        if tuple(codebook_sizes) != (SEMANTIC,):
            raise TokenIdError(f"the {cls.name} scheme takes BiCodec tokens (1 codebook of "
                               f"{SEMANTIC}), got sizes {list(codebook_sizes)}")
        if tokenizer is None:
            raise TokenIdError(f"the {cls.name} scheme reads its ids from the language model's "
                               "tokenizer: pass its tokenizer.json (or the folder holding it)")
        v = Vocab(tokenizer)
        return cls([v.need(f"<|bicodec_semantic_{n}|>") for n in range(SEMANTIC)],
                   [v.need(f"<|bicodec_global_{n}|>") for n in range(GLOBAL)],
                   [v.need(m) for m in MARKERS])

    def describe(self) -> dict:
        return {"scheme": self.name, "semantic_0_id": int(self.semantic[0]),
                "global_0_id": int(self.globals[0]),
                "text": "<|bicodec_global_N|> x 32, then <|bicodec_semantic_N|> a frame"}

    def _globals(self, utterance) -> np.ndarray:
        g = np.asarray(utterance)
        if g.dtype.kind not in "iu" or g.reshape(-1).shape != (GLOBALS,):
            raise TokenIdError(f"Spark-TTS takes {GLOBALS} global tokens an utterance, got "
                               f"{g.dtype} {tuple(g.shape)}")
        g = g.reshape(-1).astype(np.int64)
        if ((g < 0) | (g >= GLOBAL)).any():
            i = int(np.argmax((g < 0) | (g >= GLOBAL)))
            raise TokenIdError(f"global token {int(g[i])} at {i} is outside 0..{GLOBAL - 1}")
        return g

    def to_ids(self, tokens, globals=None) -> np.ndarray:
        """[32 + T] ids: the global tokens' (when given), then a semantic id a frame."""
        ids = self.semantic[check_tokens(tokens, (SEMANTIC,))[0]]
        if globals is None:
            return ids
        return np.concatenate([self.globals[self._globals(globals)], ids])

    def sequence(self, tokens, globals=None) -> np.ndarray:
        """A training row's speech part: [start_global, 32 globals, end_global] (when given),
        start_semantic, the semantic ids, end_semantic."""
        ids = self.semantic[check_tokens(tokens, (SEMANTIC,))[0]]
        m = self.markers
        head = [] if globals is None else [[m[0]], self.globals[self._globals(globals)], [m[1]]]
        return np.concatenate([*head, [m[2]], ids, [m[3]]])

    def split_ids(self, ids) -> tuple[np.ndarray, np.ndarray | None]:
        """(semantic tokens [1, T], global tokens [32] or None when there are none) of a
        model's output, as Spark-TTS reads it; global tokens other than 32 are refused."""
        semantic, utterance = [], []
        for i in ints(ids, "ids").reshape(-1).tolist():
            kind = self.kind.get(i)
            if kind is not None:
                (semantic if kind[0] == "semantic" else utterance).append(kind[1])
        if utterance and len(utterance) != GLOBALS:
            raise TokenIdError(f"Spark-TTS decodes with {GLOBALS} global tokens, the ids hold "
                               f"{len(utterance)}")
        return (np.asarray(semantic, dtype=np.int64).reshape(1, -1),
                np.asarray(utterance, dtype=np.int64) if utterance else None)

    def from_ids(self, ids) -> np.ndarray:
        """Semantic tokens [1, T] (global ids and anything else passed over)."""
        return self.split_ids(ids)[0]

    def to_text(self, tokens, globals=None) -> str:
        text = "".join(f"<|bicodec_semantic_{int(n)}|>"
                       for n in check_tokens(tokens, (SEMANTIC,))[0])
        if globals is None:
            return text
        return "".join(f"<|bicodec_global_{int(n)}|>" for n in self._globals(globals)) + text

    def text_ids(self, text: str) -> np.ndarray:
        """The ids of the bicodec tokens in `text` (other tokens and text passed over)."""
        return np.asarray([self.by_text[m.group(0)] for m in self.TOKEN.finditer(text)
                           if m.group(0) in self.by_text], dtype=np.int64)

    def split_text(self, text: str) -> tuple[np.ndarray, np.ndarray | None]:
        if not isinstance(text, str):
            raise TokenIdError(f"expected text, got {type(text).__name__}")
        for m in self.TOKEN.finditer(text):
            if m.group(0) not in self.by_text:
                raise TokenIdError(f"{m.group(0)!r} is not a BiCodec token (global < {GLOBAL}, "
                                   f"semantic < {SEMANTIC})")
        return self.split_ids(self.text_ids(text))

    def from_text(self, text: str) -> np.ndarray:
        return self.split_text(text)[0]

