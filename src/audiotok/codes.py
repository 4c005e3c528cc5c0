"""Codes: tokens of a batch of items with their lengths and what made them, and their files.

Two file formats:
- `.npy`: one item, integer [K, T], exactly what fish-speech's tools write and read;
- `.codes` (anything else): a self-describing numpy .npz archive holding `tokens` [B, K, T]
  (the smallest unsigned dtype that fits), `lengths` [B], `num_samples` [B] (-1 if unknown),
  `scales` [B, S] (float32, only for a codec whose decoder needs them), `globals` [B, G] (only
  for a codec whose items carry utterance tokens) and a JSON `meta` string (format, codec name
  and version, sample rate, frame rate, codebook sizes).

Codes hold torch tensors (the torch codecs) or numpy arrays (the ONNX runtime, which runs
without torch; `load_codes(path, arrays=True)`); this module imports torch only to make tensors.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import CodesError
from .fileio import atomic_output

if TYPE_CHECKING:
    import torch

FORMAT = "audiotok-codes"
FORMAT_VERSION = 1


@dataclass
class Codes:
    """tokens [B, K, T] int64; lengths [B] valid frames per item (the rest is padding, zeros).

    num_samples [B] is the number of audio samples each item was encoded from, at sample_rate
    (the rate the codec decodes to; for a codec whose input rate differs, the input's length
    at that rate), so decoding can return exactly that many; None when unknown. scales [B, S]
    float32: what a codec that normalises its input's segments (EnCodec 48 kHz) scales each
    segment's audio by on decoding (None for the others). globals [B, G] int64: utterance
    tokens, G per item, that are not per frame (BiCodec's 32 global tokens, the speaker),
    decoded together with the frames (None for a codec without them). The arrays are torch
    tensors, or numpy arrays from the ONNX runtime; every codec decodes either kind.
    """

    tokens: torch.Tensor | np.ndarray
    lengths: torch.Tensor | np.ndarray
    codec: str | None = None
    sample_rate: int | None = None
    samples_per_frame: int | None = None
    num_samples: torch.Tensor | np.ndarray | None = None
    meta: dict = field(default_factory=dict)
    scales: torch.Tensor | np.ndarray | None = None
    globals: torch.Tensor | np.ndarray | None = None

    def __post_init__(self):
        if self.tokens.ndim != 3:
            raise CodesError(f"Codes.tokens must be [B, K, T], got shape "
                             f"{tuple(self.tokens.shape)}")
        if self.lengths.shape != (self.tokens.shape[0],):
            raise CodesError(f"Codes.lengths must have shape [{self.tokens.shape[0]}], got "
                             f"{tuple(self.lengths.shape)}")
        if int(self.lengths.max()) > self.tokens.shape[2] or int(self.lengths.min()) < 0:
            raise CodesError(f"Codes.lengths {self.lengths.tolist()} do not fit "
                             f"{self.tokens.shape[2]} frames")
        if self.scales is not None and (self.scales.ndim != 2 or
                                        self.scales.shape[0] != self.tokens.shape[0]):
            raise CodesError(f"Codes.scales must be [{self.tokens.shape[0]}, segments], got "
                             f"shape {tuple(self.scales.shape)}")
        if self.globals is not None and (self.globals.ndim != 2 or
                                         self.globals.shape[0] != self.tokens.shape[0]):
            raise CodesError(f"Codes.globals must be [{self.tokens.shape[0]}, utterance tokens], "
                             f"got shape {tuple(self.globals.shape)}")

    @property
    def frame_rate(self) -> float | None:
        if self.sample_rate and self.samples_per_frame:
            return self.sample_rate / self.samples_per_frame
        return None

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, i: int) -> Codes:
        """Item i alone, trimmed to its length."""
        n = int(self.lengths[i])
        return replace(
            self, tokens=self.tokens[i : i + 1, :, :n], lengths=self.lengths[i : i + 1],
            num_samples=None if self.num_samples is None else self.num_samples[i : i + 1],
            scales=None if self.scales is None else self.scales[i : i + 1],
            globals=None if self.globals is None else self.globals[i : i + 1],
        )

    def require_codec(self, name: str) -> None:
        """Raise unless these codes come from codec `name` (or from an unknown codec)."""
        if self.codec is not None and self.codec != name:
            raise CodesError(f"these codes were made by the {self.codec!r} codec; this is the "
                             f"{name!r} codec")

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically: `.npy` (one item, fish-speech layout) or the `.codes` archive."""
        save_codes(self, path)

    @staticmethod
    def load(path: str | os.PathLike, arrays: bool = False) -> Codes:
        """Read a file; arrays=True: numpy arrays instead of torch tensors."""
        return load_codes(path, arrays)


def as_numpy(x) -> np.ndarray:
    """A torch tensor (any device) or array-like as a numpy array."""
    if type(x).__module__.split(".", 1)[0] == "torch":
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _tensors(arrays: bool):
    """How loaded int64 arrays are returned: as they are, or as torch tensors."""
    if arrays:
        return lambda a: a
    import torch

    return torch.from_numpy


def _smallest_uint(max_value: int) -> np.dtype:
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_value <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.int64)


def save_npy(path: str | os.PathLike, tokens: np.ndarray) -> None:
    """One item's tokens [K, T] as an int64 `.npy` file (fish-speech's layout), atomically."""
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        np.save(f, np.asarray(tokens).astype(np.int64))


def save_codes(codes: Codes, path: str | os.PathLike) -> None:
    path = Path(path)
    if path.suffix == ".npy":
        if len(codes) != 1:
            raise CodesError(f"{path}: a .npy codes file holds one item, got a batch of "
                             f"{len(codes)}; save as .codes or save each item")
        for part, what in ((codes.scales, "segment scales"), (codes.globals, "utterance tokens")):
            if part is not None:
                raise CodesError(f"{path}: a .npy codes file holds tokens only, and these codes "
                                 f"carry {what}; save as .codes")
        save_npy(path, as_numpy(codes.tokens)[0, :, : int(codes.lengths[0])])
        return
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **_archive(codes, path))


def _archive(codes: Codes, name) -> dict:
    """The arrays of a `.codes` archive."""
    tokens, lengths = as_numpy(codes.tokens), as_numpy(codes.lengths)
    num_samples = (as_numpy(codes.num_samples) if codes.num_samples is not None
                   else np.full_like(lengths, -1))
    meta = dict(codes.meta, format=FORMAT, format_version=FORMAT_VERSION, codec=codes.codec,
                sample_rate=codes.sample_rate, samples_per_frame=codes.samples_per_frame,
                frame_rate=codes.frame_rate)
    if tokens.size and int(tokens.min()) < 0:
        raise CodesError(f"{name}: negative tokens cannot be saved")
    dtype = _smallest_uint(int(tokens.max()) if tokens.size else 0)
    out = dict(tokens=tokens.astype(dtype), lengths=lengths, num_samples=num_samples,
               meta=np.array(json.dumps(meta)))
    if codes.scales is not None:
        out["scales"] = as_numpy(codes.scales).astype(np.float32)
    if codes.globals is not None:
        g = as_numpy(codes.globals)
        if g.size and int(g.min()) < 0:
            raise CodesError(f"{name}: negative utterance tokens cannot be saved")
        out["globals"] = g.astype(_smallest_uint(int(g.max()) if g.size else 0))
    return out


def codes_to_bytes(codes: Codes) -> bytes:
    """The `.codes` archive of `codes`, in memory."""
    buf = io.BytesIO()
    np.savez(buf, **_archive(codes, "codes"))
    return buf.getvalue()


def load_codes_bytes(data: bytes, name: str = "body", arrays: bool = False) -> Codes:
    """A `.codes` archive from memory (arrays=True: numpy arrays instead of torch tensors)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            content = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, AttributeError) as e:
        raise CodesError(f"{name}: cannot read codes (not .npy, .codes or JSON: {e})") from None
    if not isinstance(content, dict):
        raise CodesError(f"{name}: not an audiotok codes archive")
    return _from_archive(content, name, _tensors(arrays))


def load_codes(path: str | os.PathLike, arrays: bool = False) -> Codes:
    """Read a `.npy` (fish-speech, [K, T]) or `.codes` file (arrays=True: numpy arrays instead
    of torch tensors)."""
    path = Path(path)
    if not path.is_file():
        raise CodesError(f"{path}: no such codes file")
    try:
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
            return _from_npy(arr, path, _tensors(arrays))
        with np.load(path, allow_pickle=False) as z:
            content = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise CodesError(f"{path}: cannot read codes file ({e})") from None
    return _from_archive(content, path, _tensors(arrays))


def _from_npy(arr: np.ndarray, path: Path, make) -> Codes:
    if arr.ndim != 2 or arr.dtype.kind not in "iu":
        raise CodesError(f"{path}: expected integer tokens [K, T], got {arr.dtype} array of shape "
                         f"{arr.shape}")
    return Codes(tokens=make(arr.astype(np.int64)[None]),
                 lengths=make(np.array([arr.shape[1]], np.int64)))


def _from_archive(content: dict, path: Path, make) -> Codes:
    missing = {"tokens", "lengths", "meta"} - set(content)
    if missing:
        raise CodesError(f"{path}: not an audiotok codes file (missing {sorted(missing)})")
    try:
        meta = json.loads(str(content["meta"]))
    except ValueError:
        raise CodesError(f"{path}: unreadable metadata") from None
    if meta.get("format") != FORMAT or meta.get("format_version", 0) > FORMAT_VERSION:
        raise CodesError(f"{path}: unsupported codes format {meta.get('format')!r} version "
                         f"{meta.get('format_version')!r}")
    tokens, lengths = content["tokens"], content["lengths"]
    if tokens.ndim != 3 or tokens.dtype.kind not in "iu":
        raise CodesError(f"{path}: tokens must be integer [B, K, T], got {tokens.dtype} "
                         f"{tokens.shape}")
    num_samples = content.get("num_samples")
    ns = None
    if num_samples is not None and (num_samples >= 0).all():
        ns = make(num_samples.astype(np.int64))
    known = {"format", "format_version", "codec", "sample_rate", "samples_per_frame", "frame_rate"}
    scales = content.get("scales")
    if scales is not None and (scales.ndim != 2 or scales.dtype.kind != "f"):
        raise CodesError(f"{path}: scales must be float [B, segments], got {scales.dtype} "
                         f"{scales.shape}")
    utterance = content.get("globals")
    if utterance is not None and (utterance.ndim != 2 or utterance.dtype.kind not in "iu"
                                  or utterance.shape[0] != tokens.shape[0]):
        raise CodesError(f"{path}: globals must be integer [{tokens.shape[0]}, utterance "
                         f"tokens], got {utterance.dtype} {utterance.shape}")
    return Codes(
        tokens=make(tokens.astype(np.int64)), lengths=make(lengths.astype(np.int64)),
        codec=meta.get("codec"), sample_rate=meta.get("sample_rate"),
        samples_per_frame=meta.get("samples_per_frame"), num_samples=ns,
        meta={k: v for k, v in meta.items() if k not in known},
        scales=None if scales is None else make(scales.astype(np.float32)),
        globals=None if utterance is None else make(utterance.astype(np.int64)),
    )
