"""Codec tokens <-> a language model's token ids.

Schemes: `GenericIds` here (an id offset per codebook, frame- or codebook-major flattening, and
optionally MusicGen's delay pattern: codebook k shifted right by k frames, gaps filled, with its
exact inverse), and those of the language models that use a codec, declared by its family
(`Family.llm_schemes`, in models/<family>/llm.py), which read their ids from the model's
tokenizer with `Vocab`. `scheme_for(name, ...)` finds any of them by name.

Every scheme maps both ways, in id form (numpy integer arrays) and text form
(`"<|s_12|><|s_7|>"`), and names any id outside its speech range. A scheme class has `name`,
`for_codec(tokenizer, codebook_sizes)` (`needs_tokenizer = False`: ids are arithmetic, the
tokenizer may be None), `describe()`, `sequence(tokens)` (the ids a training row
holds), `to_ids`/`from_ids` and `to_text`/`from_text`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import AudiotokError


class TokenIdError(AudiotokError, ValueError):
    """Ids or text that are not speech tokens of the scheme, or a tokenizer without them."""


# -- tokenizers --------------------------------------------------------------------------------

class Vocab:
    """token -> id of a tokenizer file: a Hugging Face `tokenizer.json` (read with the
    `tokenizers` package), a folder holding one, or a JSON object of token -> id (fish-speech's
    `special_tokens.json`)."""

    def __init__(self, path: str | os.PathLike):
        path = Path(path)
        if path.is_dir():
            for name in ("tokenizer.json", "special_tokens.json"):
                if (path / name).is_file():
                    path = path / name
                    break
            else:
                raise TokenIdError(f"{path}: no tokenizer.json or special_tokens.json")
        if not path.is_file():
            raise TokenIdError(f"{path}: no such tokenizer file")
        self.path = path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TokenIdError(f"{path}: not a JSON tokenizer file ({e})") from None
        if isinstance(data, dict) and "model" in data:
            try:
                from tokenizers import Tokenizer
            except ImportError:
                raise TokenIdError("reading tokenizer.json needs the tokenizers package "
                                   "(pip install tokenizers)") from None
            tok = Tokenizer.from_str(json.dumps(data))
            self._lookup = tok.token_to_id
        elif isinstance(data, dict) and all(isinstance(v, int) for v in data.values()):
            self._lookup = data.get
        else:
            raise TokenIdError(f"{path}: expected a tokenizer.json or a token -> id JSON object")

    def id(self, token: str) -> int | None:
        return self._lookup(token)

    def need(self, token: str) -> int:
        i = self.id(token)
        if i is None:
            raise TokenIdError(f"{self.path}: the tokenizer has no {token!r} token")
        return i

    def run(self, template: str, count: int) -> int:
        """The id of template.format(0), checking that template.format(i) is that id + i for
        every i < count (the scheme relies on consecutive ids)."""
        first = self.need(template.format(0))
        for i in range(1, count):
            got = self.id(template.format(i))
            if got != first + i:
                raise TokenIdError(f"{self.path}: {template.format(i)!r} has id {got}, expected "
                                   f"{first + i} (ids of {template.format('i')!r} must be "
                                   "consecutive)")
        return first


def ints(ids, what: str) -> np.ndarray:
    a = np.asarray(ids)
    if a.dtype.kind not in "iu":
        raise TokenIdError(f"{what}: expected integer ids, got {a.dtype}")
    return a.astype(np.int64)


def check_tokens(tokens, sizes: Sequence[int]) -> np.ndarray:
    t = np.asarray(tokens)
    if t.ndim != 2 or t.shape[0] != len(sizes) or t.dtype.kind not in "iu":
        raise TokenIdError(f"expected integer tokens [{len(sizes)}, T], got {t.dtype} "
                           f"{tuple(t.shape)}")
    t = t.astype(np.int64)
    for k, size in enumerate(sizes):
        bad = (t[k] < 0) | (t[k] >= size)
        if bad.any():
            f = int(np.argmax(bad))
            raise TokenIdError(f"token {int(t[k, f])} at codebook {k}, frame {f} is outside "
                               f"0..{size - 1}")
    return t


def outside(ids: np.ndarray, lo: int, hi: int, what: str) -> None:
    bad = (ids < lo) | (ids >= hi)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise TokenIdError(f"id {int(ids.reshape(-1)[i])} at position {i} is not {what} "
                           f"(ids {lo}..{hi - 1})")


_TOKEN = re.compile(r"<\|([^|>]*)\|>")


def parse_text(text: str, pattern: re.Pattern, what: str, token: re.Pattern = _TOKEN
               ) -> list[str]:
    """The tokens of `text` (each `<|...|>`, or a match of `token`) in order; anything between
    them is an error, and so is a token that `pattern` does not match."""
    out, pos = [], 0
    for m in token.finditer(text):
        if text[pos: m.start()].strip():
            raise TokenIdError(f"unexpected text {text[pos: m.start()].strip()[:30]!r} after "
                               f"character {pos}")
        out.append(m.group(0))
        pos = m.end()
    if text[pos:].strip():
        raise TokenIdError(f"unexpected text {text[pos:].strip()[:30]!r} after character {pos}")
    for t in out:
        if not pattern.fullmatch(t):
            raise TokenIdError(f"{t!r} is not {what}")
    return out


def text_numbers(text: str, pattern: re.Pattern, what: str) -> np.ndarray:
    """The numbers (`pattern`'s group 1) of `text`'s tokens in order (parse_text's errors)."""
    return np.asarray([int(pattern.fullmatch(t).group(1))
                       for t in parse_text(text, pattern, what)], dtype=np.int64)


def step_columns(ids: np.ndarray, k: int) -> np.ndarray:
    """[k, steps] of ids written step after step (k ids a step)."""
    if ids.size % k:
        raise TokenIdError(f"{ids.size} ids are not whole steps of {k} codebooks")
    return ids.reshape(-1, k).T


def check_pattern(ids: np.ndarray, want: np.ndarray, codes: int) -> None:
    """TokenIdError naming the first place where `ids` [K, S] do not hold the special ids (those
    >= `codes`) of the delay pattern `want` [K, S] (the pattern of the same number of frames)."""
    special = want >= codes
    if (ids[special] != want[special]).any():
        c, s = (int(i) for i in np.argwhere(special & (ids != want))[0])
        raise TokenIdError(f"id {int(ids[c, s])} at codebook {c}, step {s}: the delay pattern "
                           f"has {int(want[c, s])} there")


def delayed(tokens: np.ndarray, delays: Sequence[int], steps: int, before: int,
             after: np.ndarray) -> np.ndarray:
    """[K, steps]: row k holds `before` until delays[k], its codes from there, then `after[k]`
    (a row of fill ids for the steps after its codes): the delay patterns of multi-codebook
    language models (Dia, Parler-TTS, MusicGen)."""
    k, t = tokens.shape
    out = np.full((k, steps), before, np.int64)
    for i, d in enumerate(delays):
        out[i, d : d + t] = tokens[i]
        out[i, d + t :] = after[i, : steps - d - t]
    return out


# -- generic ----------------------------------------------------------------------------------

class GenericIds:
    """Per-codebook id ranges from `offset` (codebook k at offset + sum of earlier sizes),
    flattened frame-major (f0c0 f0c1 .. f1c0 ..) or codebook-major (c0f0 c0f1 .. c1f0 ..), with
    MusicGen's delay pattern if asked (codebook k shifted right by k frames, the gaps `pad_id`,
    T + K - 1 steps). Text form: `<|a_ID|>` with ID relative to `offset`."""

    name = "generic"
    summary = "an id range per codebook from --llm-offset, frame-major"
    PATTERN = re.compile(r"<\|a_(\d+)\|>")

    skip_ids: tuple[int, ...] = ()
    end_ids: tuple[int, ...] = ()

    def __init__(self, codebook_sizes: Sequence[int], offset: int = 0, order: str = "frame",
                 delay: bool = False, pad_id: int | None = None):
        if order not in ("frame", "codebook"):
            raise TokenIdError(f"order must be 'frame' or 'codebook', got {order!r}")
        self.sizes = tuple(int(s) for s in codebook_sizes)
        self.offset = int(offset)
        self.offsets = self.offset + np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.end = self.offset + sum(self.sizes)
        self.order, self.delay = order, bool(delay)
        self.pad = self.end if pad_id is None else int(pad_id)
        if self.offset <= self.pad < self.end:
            raise TokenIdError(f"pad_id {self.pad} falls inside the codebook ids "
                               f"{self.offset}..{self.end - 1}")

    def describe(self) -> dict:
        return {"scheme": self.name, "offset": self.offset, "order": self.order,
                "delay": self.delay, "pad_id": self.pad}

    def sequence(self, tokens) -> np.ndarray:
        return self.to_ids(tokens)

    def _matrix(self, tokens) -> np.ndarray:
        """[K, S] ids, delayed when asked."""
        t = check_tokens(tokens, self.sizes) + self.offsets[:, None]
        if not self.delay:
            return t
        k, n = t.shape
        out = np.full((k, n + k - 1), self.pad, dtype=np.int64)
        for i in range(k):
            out[i, i: i + n] = t[i]
        return out

    def to_ids(self, tokens) -> np.ndarray:
        m = self._matrix(tokens)
        return (m.T if self.order == "frame" else m).reshape(-1)

    def from_ids(self, ids) -> np.ndarray:
        a = ints(ids, "ids")
        k = len(self.sizes)
        if a.ndim != 1 or a.size % k:
            raise TokenIdError(f"expected ids [N] with N a multiple of {k} codebooks, got shape "
                               f"{a.shape}")
        m = a.reshape(-1, k).T if self.order == "frame" else a.reshape(k, -1)
        if self.delay:
            steps = m.shape[1]
            n = steps - k + 1
            if n < 0:
                raise TokenIdError(f"{steps} delayed steps are fewer than {k - 1}, the delay of "
                                   "the last codebook")
            pads = np.ones_like(m, dtype=bool)
            for i in range(k):
                pads[i, i: i + n] = False
            if (m[pads] != self.pad).any():
                raise TokenIdError(f"a delay-pattern gap holds an id other than pad_id "
                                   f"{self.pad}")
            m = np.stack([m[i, i: i + n] for i in range(k)])
        tokens = m - self.offsets[:, None]
        for i, size in enumerate(self.sizes):
            bad = (tokens[i] < 0) | (tokens[i] >= size)
            if bad.any():
                f = int(np.argmax(bad))
                raise TokenIdError(f"id {int(m[i, f])} at codebook {i}, frame {f} is outside "
                                   f"that codebook's ids {self.offsets[i]}.."
                                   f"{self.offsets[i] + size - 1}")
        return tokens

    def to_text(self, tokens) -> str:
        return "".join(f"<|a_{int(i) - self.offset}|>" for i in self.to_ids(tokens))

    def text_ids(self, text: str) -> np.ndarray:
        """The ids of a text form, not yet framed."""
        return text_numbers(text, self.PATTERN, "an <|a_i|> token") + self.offset

    def from_text(self, text: str) -> np.ndarray:
        return self.from_ids(self.text_ids(text))

    @property
    def ids_per_frame(self) -> int | None:
        """Ids of one frame when frames come one after another (IdReader), else None."""
        return len(self.sizes) if self.order == "frame" and not self.delay else None

    def slot_ids(self, k: int) -> tuple[int, int]:
        """The ids [lo, hi) of position k of a frame."""
        return int(self.offsets[k]), int(self.offsets[k]) + self.sizes[k]


class IdReader:
    """A language model's output as it comes (ids, or text in any pieces) -> whole frames of
    tokens [K, t], for a scheme whose frames follow one another (`ids_per_frame`): an Orpheus
    server's audio stage. The scheme's `skip_ids` (start of speech) are passed over and its
    `end_ids` (end of speech) end the input; any other id outside the speech range is refused.
    `finish()` drops the ids of an incomplete last frame (the language models' own offline
    parsers drop them too) and says how many (also `dropped`)."""

    MAX_PENDING_TEXT = 256  # characters of an unfinished token held back

    def __init__(self, scheme):
        if getattr(scheme, "ids_per_frame", None) is None:
            raise TokenIdError(f"the {scheme.name} scheme does not send frames one after "
                               "another, so its ids cannot be read as they come")
        self.scheme = scheme
        self.per_frame = scheme.ids_per_frame
        self.lo, self.hi = np.array([scheme.slot_ids(k) for k in range(self.per_frame)]).T
        self.pending = np.zeros(0, np.int64)  # ids of a frame not yet complete
        self.text = ""  # text after the last complete token
        self.ended = False
        self.ids_read = 0  # speech ids so far (markers not counted)
        self.dropped = 0  # ids of an incomplete last frame, dropped at the end

    def feed_ids(self, ids) -> np.ndarray:
        """Tokens [K, t] of the frames these ids complete (t may be 0)."""
        a = ints(ids, "ids").reshape(-1)
        if self.ended and a.size:
            raise TokenIdError(f"id {int(a[0])} after the end of speech")
        end = np.isin(a, self.scheme.end_ids)
        if end.any():
            a, self.ended = a[: int(np.argmax(end))], True
        a = a[~np.isin(a, self.scheme.skip_ids)]
        slot = (self.ids_read + np.arange(a.size)) % self.per_frame
        bad = (a < self.lo[slot]) | (a >= self.hi[slot])
        if bad.any():
            i = int(np.argmax(bad))
            raise TokenIdError(f"id {int(a[i])} (speech id {self.ids_read + i} of the stream) is "
                               f"not an id of frame slot {slot[i]} ({self.lo[slot[i]]}.."
                               f"{self.hi[slot[i]] - 1})")
        self.ids_read += a.size
        a = np.concatenate([self.pending, a])
        whole = a.size - a.size % self.per_frame
        self.pending = a[whole:]
        return self.scheme.from_ids(a[:whole])

    def feed_text(self, text: str) -> np.ndarray:
        """Tokens [K, t] of the frames this text completes; a token may be split across
        pieces (the text after the last complete token waits for the next piece)."""
        if not isinstance(text, str):
            raise TokenIdError(f"expected text, got {type(text).__name__}")
        text = self.text + text
        cut = text.rfind(">") + 1
        head, self.text = text[:cut], text[cut:]
        if len(self.text) > self.MAX_PENDING_TEXT:
            raise TokenIdError(f"{len(self.text)} characters without a complete token: "
                               f"{self.text[:30]!r}...")
        return self.feed_ids(self.scheme.text_ids(head))

    def finish(self) -> int:
        """The end of the input: the ids of an incomplete last frame are dropped (returned:
        how many); text that is not a whole token is an error."""
        if self.text.strip():
            raise TokenIdError(f"the text ends with {self.text[:30]!r}, not a whole token")
        self.dropped, self.pending, self.ended = self.pending.size, self.pending[:0], True
        return self.dropped


def scheme_names() -> list[str]:
    """Every scheme's name: the families' and "generic"."""
    from ..models.registry import llm_schemes

    return [*llm_schemes(), GenericIds.name]


def scheme_help() -> str:
    """One line per scheme: "name (summary)", for the command line."""
    from ..models.registry import llm_schemes

    lines = [f"{name} ({family.resolve(ref).summary})"
             for name, (family, ref) in llm_schemes().items()]
    return "; ".join([*lines, f"{GenericIds.name} ({GenericIds.summary})"])


def scheme_for(name: str, codebook_sizes: Sequence[int], tokenizer=None, **generic):
    """A scheme by name for a codec's codebooks: a family's scheme reads its ids from
    `tokenizer`; generic takes offset/order/delay/pad_id."""
    from ..models.registry import llm_schemes

    if name == GenericIds.name:
        return GenericIds(codebook_sizes, **generic)
    schemes = llm_schemes()
    if name not in schemes:
        raise TokenIdError(f"unknown scheme {name!r}; expected one of "
                           f"{', '.join(scheme_names())}")
    family, ref = schemes[name]
    scheme = family.resolve(ref)
    if tokenizer is None and getattr(scheme, "needs_tokenizer", True):
        raise TokenIdError(f"the {name} scheme ({scheme.summary}) reads its ids from the "
                           "language model's tokenizer (tokenizer=, --tokenizer)")
    return scheme.for_codec(tokenizer, codebook_sizes)
