"""The token ids of the language models that use the X-Codec family (export/llm.py says what a
scheme is): Higgs Audio v2 (bosonai/higgs-audio-v2-generation-3B-base: Llama-3.2-3B with audio
embeddings and heads for the tokenizer's 8 codebooks) and YuE (m-a-p/YuE-s1-7B-*,
YuE-s2-1B-general, over xcodec_mini_infer). Neither needs a tokenizer: the ids are fixed.

`higgs-audio-v2` (boson-multimodal's collator and `build_delay_pattern_mask`): each clip's
codes [8, T] get a column of 1024 (the audio stream's BOS) before and a column of 1025 (its
EOS) after, then MusicGen's delay: codebook k shifted right by k steps, its k leading holes
1024, its 7 - k trailing holes 1025: [8, T + 9]. The LM sums codebook k's embedding of id
k x 1026 + value into one position a step (the text form's ids). Back: Boson's serve engine
reverts the delay (row k, steps k .. k + T + 1), clips to 0..1023 and drops the first and last
column; here the pattern's BOS and EOS are checked and an id that is not a code refused, or
(clamp=True) the serve engine's clip.

`yue-stage1`, `yue-stage2` (YuE's `inference/codecmanipulator.py` and `infer.py`, mm tokenizer
v0.2): codebook k's code c is id 45334 + k x 1024 + c, codebooks frame by frame. Stage 1 takes
codebook 0 only, in blocks `<SOA>` 32001 `<xcodec>` 32016 ... `<EOA>` 32002, vocals and
accompaniment interleaved frame by frame; stage 2 generates codebooks 0-7, 8 ids a frame, after
`<SOA> <stage_1>` 32013, codebook 0's ids, `<stage_2>` 32017. Back, YuE replaces an id outside
its codebook by its row's most frequent value (`clamp=True`); by default it is refused.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ...export.llm import (
    TokenIdError,
    check_pattern,
    check_tokens,
    delayed,
    ints,
    step_columns,
    text_numbers,
)

CODES, BOS, EOS = 1024, 1024, 1025
TABLE = 1026  # each codebook's embedding rows: codes, BOS, EOS


class HiggsIds:
    """Higgs Audio v2: [8, T + 9] ids, BOS/EOS columns around the codes, codebook k delayed k
    steps (module docstring)."""

    name = "higgs-audio-v2"
    summary = ("Higgs Audio v2: BOS 1024 / EOS 1025 columns around the codes, codebook k "
               "delayed k (per-codebook tables of 1026)")
    needs_tokenizer = False
    ids_per_frame = None  # the codebooks are delayed: not read frame by frame
    PATTERN = re.compile(r"<\|higgs_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if not self.sizes or any(s != CODES for s in self.sizes):
            raise TokenIdError(f"the {self.name} scheme takes Higgs Audio v2 tokenizer tokens "
                               f"({CODES} codes a codebook), got sizes {list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]) -> HiggsIds:
        return cls(codebook_sizes)

    def describe(self) -> dict:
        k = len(self.sizes)
        return {"scheme": self.name, "delays": list(range(k)), "bos": BOS, "eos": EOS,
                "steps": f"T + {k + 1} (a BOS and an EOS column, the delays)",
                "embedding_id": f"k x {TABLE} + value"}

    def to_ids(self, tokens) -> np.ndarray:
        """[K, T + K + 1]: codebook k holds BOS at steps 0..k, its codes at k + 1 .. k + T,
        EOS from k + T + 1 on."""
        t = check_tokens(tokens, self.sizes)
        k = len(self.sizes)
        wrapped = np.concatenate([np.full((k, 1), BOS), t, np.full((k, 1), EOS)], 1)
        steps = wrapped.shape[1] + k - 1
        return delayed(wrapped, range(k), steps, BOS, np.full((k, steps), EOS, np.int64))

    def from_ids(self, ids, clamp: bool = False) -> np.ndarray:
        """Tokens [K, T] of ids [K, S] (T = S - K - 1); the pattern's BOS and EOS must be in
        place and the rest codes, or with clamp=True anything goes: Boson's serve engine
        clips every value to 0..1023 and drops the first and last column."""
        a = ints(ids, "ids")
        k = len(self.sizes)
        if a.ndim != 2 or a.shape[0] != k or a.shape[1] < k + 1:
            raise TokenIdError(f"expected Higgs Audio v2 ids [{k}, S >= {k + 1}], got shape "
                               f"{a.shape}")
        frames = a.shape[1] - k - 1
        rows = np.stack([a[c, c : c + frames + 2] for c in range(k)])
        if clamp:
            return np.clip(rows, 0, CODES - 1)[:, 1:-1]
        check_pattern(a, self.to_ids(np.zeros((k, frames), np.int64)), CODES)
        values = rows[:, 1:-1]
        bad = (values < 0) | (values >= CODES)
        if bad.any():
            c, t = (int(i) for i in np.argwhere(bad)[0])
            raise TokenIdError(f"id {int(values[c, t])} at codebook {c}, step {c + t + 1} is not "
                               f"a code (0..{CODES - 1})")
        return values

    def sequence(self, tokens) -> np.ndarray:
        """The steps one after another, each codebook's id in its embedding table
        (k x 1026 + value)."""
        ids = self.to_ids(tokens)
        return (ids + TABLE * np.arange(len(self.sizes))[:, None]).T.reshape(-1)

    def to_text(self, tokens) -> str:
        return "".join(f"<|higgs_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        k = len(self.sizes)
        ids = text_numbers(text, self.PATTERN, "a <|higgs_i|> token")
        steps = step_columns(ids, k)
        table = np.arange(k)[:, None] * TABLE
        if ((steps < table) | (steps >= table + TABLE)).any():
            c, s = (int(i) for i in np.argwhere((steps < table) | (steps >= table + TABLE))[0])
            raise TokenIdError(f"<|higgs_{int(steps[c, s])}|> at step {s} is not in codebook "
                               f"{c}'s table ({c * TABLE}..{(c + 1) * TABLE - 1})")
        return self.from_ids(steps - table)


# -- YuE ------------------------------------------------------------------------------------------

YUE_OFFSET = 45334  # mm tokenizer v0.2: X-Codec's 12 x 1024 ids from here
SOA, EOA, XCODEC, STAGE_1, STAGE_2 = 32001, 32002, 32016, 32013, 32017


class _YueIds:
    """Shared: YuE's X-Codec ids (45334 + k x 1024 + code, codebooks frame-major), no tokenizer
    (mm tokenizer v0.2's ids are fixed)."""

    name = ""
    summary = ""
    needs_tokenizer = False
    BOOKS = 1
    PATTERN = re.compile(r"<\|yue_(\d+)\|>")

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        if len(self.sizes) < self.BOOKS or any(s != CODES for s in self.sizes):
            raise TokenIdError(f"the {self.name} scheme takes X-Codec tokens of at least "
                               f"{self.BOOKS} codebook(s) of {CODES}, got sizes "
                               f"{list(self.sizes)}")

    @classmethod
    def for_codec(cls, tokenizer, codebook_sizes: Sequence[int]):
        return cls(codebook_sizes)

    def codes_to_ids(self, tokens) -> np.ndarray:
        """[BOOKS T]: the first BOOKS codebooks, frame by frame (CodecManipulator.npy2ids)."""
        t = check_tokens(tokens, self.sizes)[: self.BOOKS]
        return (t + YUE_OFFSET + CODES * np.arange(self.BOOKS)[:, None]).T.reshape(-1)

    def ids_to_codes(self, ids, clamp: bool = False) -> np.ndarray:
        """Codes [BOOKS, T] of frame-major ids (CodecManipulator.ids2npy); an id outside its
        codebook's range is refused with its place, or with clamp=True replaced by the most
        frequent code of its row, as YuE's stage 2 does."""
        a = ints(ids, "ids").reshape(-1)
        if a.size % self.BOOKS:
            raise TokenIdError(f"{a.size} ids are not whole frames of {self.BOOKS} codebooks")
        values = a.reshape(-1, self.BOOKS).T - YUE_OFFSET - CODES * np.arange(self.BOOKS)[:, None]
        bad = (values < 0) | (values >= CODES)
        if not bad.any():
            return values
        if not clamp:
            c, t = (int(i) for i in np.argwhere(bad)[0])
            raise TokenIdError(f"id {int(a[t * self.BOOKS + c])} at frame {t}, codebook {c} is "
                               f"not a YuE X-Codec id ({YUE_OFFSET + c * CODES}.."
                               f"{YUE_OFFSET + (c + 1) * CODES - 1})")
        out = values.copy()
        for c in range(self.BOOKS):
            if bad[c].any():  # the row's most frequent value (bad ones counted too, as YuE
                # counts them), the first seen of ties
                counts = Counter(values[c].tolist())
                out[c, bad[c]] = max(counts.items(), key=lambda kv: kv[1])[0]
        return out

    def to_text(self, tokens) -> str:
        return "".join(f"<|yue_{int(i)}|>" for i in self.sequence(tokens))

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(text_numbers(text, self.PATTERN, "a <|yue_i|> token"))


class YueStage1Ids(_YueIds):
    """YuE stage 1: codebook 0 only (the codec at 0.5 kbps), an audio block `<SOA> <xcodec>
    ids <EOA>`; two tracks (vocals, accompaniment) interleave frame by frame."""

    name = "yue-stage1"
    summary = "YuE stage 1: <SOA><xcodec> 45334 + codebook 0 <EOA>; dual tracks interleaved"
    ids_per_frame = None  # blocks and tracks: read whole

    def describe(self) -> dict:
        return {"scheme": self.name, "offset": YUE_OFFSET, "soa": SOA, "eoa": EOA,
                "xcodec": XCODEC, "codebooks": 1, "dual": "vocals and accompaniment "
                "interleaved frame by frame (to_ids_dual / from_ids_dual)"}

    def to_ids(self, tokens) -> np.ndarray:
        """[T + 3]: <SOA> <xcodec>, codebook 0's ids, <EOA> (infer.py's audio prompt)."""
        return np.concatenate([[SOA, XCODEC], self.codes_to_ids(tokens), [EOA]])

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def from_ids(self, ids, clamp: bool = False) -> np.ndarray:
        """Codes [1, T] of one track's audio blocks (every <SOA> .. <EOA> block in order, its
        <xcodec> dropped), or of bare ids."""
        return np.concatenate([self.ids_to_codes(b, clamp) for b in _blocks(ids)], 1)

    def to_ids_dual(self, vocals, accompaniment) -> np.ndarray:
        """[2 T + 3]: <SOA> <xcodec>, the two tracks' codebook 0 ids interleaved frame by
        frame (vocals first, infer.py's dual-track prompt), <EOA>; the shorter track sets T."""
        v, a = self.codes_to_ids(vocals), self.codes_to_ids(accompaniment)
        n = min(v.size, a.size)
        return np.concatenate([[SOA, XCODEC], np.stack([v[:n], a[:n]], 1).reshape(-1), [EOA]])

    def from_ids_dual(self, ids, clamp: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(vocals [1, T], accompaniment [1, T]) of stage 1's output: each <SOA> .. <EOA>
        block's ids (its <xcodec> dropped, an odd last id dropped) de-interleaved, the blocks
        joined, as infer.py reads them."""
        vocals, accompaniment = [], []
        for b in _blocks(ids):
            b = b[: b.size // 2 * 2].reshape(-1, 2)
            vocals.append(self.ids_to_codes(b[:, 0], clamp))
            accompaniment.append(self.ids_to_codes(b[:, 1], clamp))
        return np.concatenate(vocals, 1), np.concatenate(accompaniment, 1)


class YueStage2Ids(_YueIds):
    """YuE stage 2: codebooks 0-7 frame by frame (8 ids a frame), after the prompt `<SOA>
    <stage_1> codebook 0's ids <stage_2>`."""

    name = "yue-stage2"
    summary = "YuE stage 2: 45334 + k x 1024 + code, 8 codebooks frame by frame"
    BOOKS = 8
    ids_per_frame = 8

    def describe(self) -> dict:
        return {"scheme": self.name, "offset": YUE_OFFSET, "codebooks": self.BOOKS,
                "order": "frame-major", "prompt": "<SOA> <stage_1> codebook 0 <stage_2>"}

    def to_ids(self, tokens) -> np.ndarray:
        """[8 T]: frame by frame, codebooks 0..7 (what stage 2 generates after its prompt)."""
        return self.codes_to_ids(tokens)

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def prompt(self, tokens) -> np.ndarray:
        """[T + 3]: <SOA> <stage_1>, codebook 0's ids, <stage_2> (stage2_generate's prompt)."""
        first = check_tokens(tokens, self.sizes)[0] + YUE_OFFSET
        return np.concatenate([[SOA, STAGE_1], first, [STAGE_2]])

    def from_ids(self, ids, clamp: bool = False) -> np.ndarray:
        """Codes [8, T] of stage 2's output ids (8 a frame)."""
        return self.ids_to_codes(ids, clamp)


def _blocks(ids) -> list[np.ndarray]:
    """The <SOA> .. <EOA> blocks' ids (a leading <xcodec> dropped), or all ids when there is
    no <SOA>; unpaired markers are refused."""
    a = ints(ids, "ids").reshape(-1)
    starts, ends = np.flatnonzero(a == SOA), np.flatnonzero(a == EOA)
    if not starts.size and not ends.size:
        return [a[1:] if a.size and a[0] == XCODEC else a]
    if starts.size != ends.size or (starts >= ends).any():
        raise TokenIdError(f"unpaired <SOA> ({SOA}) and <EOA> ({EOA}) ids: {starts.size} and "
                           f"{ends.size}")
    out = []
    for s, e in zip(starts, ends, strict=True):
        b = a[s + 1 : e]
        out.append(b[1:] if b.size and b[0] == XCODEC else b)
    return out
