"""Audio in and out: read (soundfile), resample (soxr), downmix, validate, write."""

from __future__ import annotations

import errno
import io
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soundfile as sf
import soxr

from .errors import AudioError
from .fileio import atomic_output

if TYPE_CHECKING:
    import torch

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif", ".au",
                  ".caf", ".w64", ".rf64"}


@dataclass
class AudioItem:
    """One signal at the codec's rate, plus where it came from: mono [N], or [C, N] for a
    codec of C > 1 channels."""

    samples: torch.Tensor | np.ndarray  # float32 (numpy with to_items(arrays=True))
    source_rate: int
    source_samples: int
    name: str


def read_audio(source: str | os.PathLike | bytes, name: str | None = None
               ) -> tuple[np.ndarray, int]:
    """(samples [C, N] float32, sample rate) of an audio file or of its bytes."""
    name = name or (str(source) if not isinstance(source, bytes) else "<bytes>")
    if isinstance(source, bytes):
        handle = io.BytesIO(source)
    else:
        if not Path(source).is_file():
            raise AudioError(f"{name}: no such audio file")
        handle = source
    try:
        with sf.SoundFile(handle) as f:
            data = f.read(dtype="float32", always_2d=True)
            rate = f.samplerate
            log = f.extra_info
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
        reason = re.sub(r"^Error opening <[^>]*>: ", "", _first_line(e))
        raise AudioError(f"{name}: cannot read audio ({reason})") from None
    check_complete(log, name)
    return np.ascontiguousarray(data.T), rate


def check_complete(log: str, name: str) -> None:
    """Raise if libsndfile's log of an opened file (SoundFile.extra_info) says it is cut short."""
    truncated = _TRUNCATED.search(log)
    if truncated:
        declared, actual = int(truncated[1]), int(truncated[2])
        if actual < declared and declared not in _STREAMING_SIZES:
            raise AudioError(f"{name}: truncated audio file (header declares {declared} bytes of "
                             f"audio, the file holds {actual})")


# libsndfile logs "data : <declared> (should be <actual>)" when a WAV/AIFF data chunk is short.
# Streaming writers leave a placeholder size, which is not truncation.
_TRUNCATED = re.compile(r"^\s*(?:data|SSND)\s*:\s*(\d+)\s*\(should be (\d+)\)", re.MULTILINE)
_STREAMING_SIZES = {0, 0xFFFFFFFF, 0x7FFFFFFF, 0xFFFFFFFF - 8}


def write_audio(path: str | os.PathLike, samples: np.ndarray | torch.Tensor, sample_rate: int,
                subtype: str | None = None) -> None:
    """Write [N] or [C, N] samples atomically; the format follows the suffix (WAV if unknown)."""
    if _is_tensor(samples):
        samples = samples.detach().float().cpu().numpy()
    samples = np.asarray(samples, dtype=np.float32)
    data = samples.T if samples.ndim == 2 else samples
    fmt = sf.available_formats()
    kind = Path(path).suffix.lstrip(".").upper()
    kind = kind if kind in fmt else "WAV"
    with atomic_output(path) as tmp:
        try:
            sf.write(tmp, data, sample_rate, format=kind, subtype=subtype)
        except (sf.LibsndfileError, RuntimeError) as e:
            # libsndfile reports a full disk as "System error."; say what happened
            need = data.size * 4 + 4096
            if shutil.disk_usage(tmp.parent).free < need:
                raise OSError(errno.ENOSPC, f"No space left on device writing {path}") from None
            raise OSError(f"{path}: cannot write audio ({_first_line(e)})") from None


def write_audio_bytes(samples: np.ndarray, sample_rate: int, kind: str = "WAV",
                      subtype: str | None = None) -> bytes:
    """Samples [N] (or [N, C]) as an audio file in memory (kind: a soundfile format, e.g.
    WAV)."""
    buf = io.BytesIO()
    sf.write(buf, np.asarray(samples, dtype=np.float32), sample_rate, format=kind,
             subtype=subtype)
    return buf.getvalue()


def check_sample_rate(sample_rate, what: str = "sample_rate") -> int:
    if isinstance(sample_rate, (bool, np.bool_)) or not isinstance(
            sample_rate, (int, np.integer, float, np.floating)):
        raise AudioError(f"{what} must be a positive integer (Hz), got {sample_rate!r}")
    if float(sample_rate) != int(sample_rate) or int(sample_rate) <= 0:
        raise AudioError(f"{what} must be a positive integer (Hz), got {sample_rate!r}")
    return int(sample_rate)


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Resample [N] or [C, N] float32 with soxr (high quality)."""
    if rate_in == rate_out:
        return x
    y = soxr.resample(np.ascontiguousarray(x.T), rate_in, rate_out, quality="HQ")
    return np.ascontiguousarray(y.T, dtype=np.float32)


def _torch():
    import torch  # only where a torch tensor is made or given: the ONNX runtime runs without

    return torch


def _is_tensor(x) -> bool:
    return type(x).__module__.split(".", 1)[0] == "torch" and hasattr(x, "is_floating_point")


def _as_float(x, name: str, arrays: bool = False):
    """A torch/numpy array as float32 (a torch tensor, or numpy with arrays=True), integer PCM
    scaled to [-1, 1)."""
    if _is_tensor(x):
        torch = _torch()
        if x.is_floating_point():
            x = x.float()
        elif x.dtype in (torch.int16, torch.int32):
            x = x.float() / (2.0 ** (15 if x.dtype == torch.int16 else 31))
        else:
            raise AudioError(f"{name}: audio tensor of dtype {x.dtype}; expected float or "
                             "int16/int32 PCM")
        return x.detach().cpu().numpy() if arrays else x
    x = np.asarray(x)
    if x.dtype.kind == "f":
        x = np.ascontiguousarray(x, dtype=np.float32)
    elif x.dtype in (np.int16, np.int32):
        x = x.astype(np.float32) / (2.0 ** (8 * x.dtype.itemsize - 1))
    else:
        raise AudioError(f"{name}: audio array of dtype {x.dtype}; expected float or int16/int32 "
                         "PCM")
    return x if arrays else _torch().from_numpy(x)


def to_items(x, sample_rate, target_rate: int, arrays: bool = False, channels: int = 1
             ) -> list[AudioItem]:
    """Normalise any supported audio input into items at `target_rate`: mono [N] (the channels
    averaged), or with channels=2, stereo [2, N] (a mono input on both channels; more than two
    channels are refused), as the encodec package's convert_audio does.

    x: a path, bytes of an audio file, an array/tensor [N] or [C, N] (one item) or [B, C, N]
    (a batch), or a list/tuple of such single items. Arrays are at `sample_rate` (default: the
    codec's rate); files carry their own rate. arrays=True: numpy samples, without torch.
    """
    if sample_rate is not None:
        sample_rate = check_sample_rate(sample_rate)
    if isinstance(x, (list, tuple)):
        if not x:
            raise AudioError("empty list of audio inputs")
        items = []
        for i, item in enumerate(x):
            if _ndim(item) == 3:
                raise AudioError(f"item {i}: a list holds single items ([N] or [C, N]); got a "
                                 "3-D batch")
            items += _one_input(item, sample_rate, target_rate, f"item {i}", arrays, channels)
        return items
    return _one_input(x, sample_rate, target_rate, "audio", arrays, channels)


def _ndim(x) -> int:
    return x.ndim if isinstance(x, np.ndarray) or _is_tensor(x) else 0


def _one_input(x, sample_rate, target_rate, name, arrays: bool, channels: int = 1
               ) -> list[AudioItem]:
    if isinstance(x, (str, os.PathLike, bytes)):
        label = name if isinstance(x, bytes) else str(x)
        data, rate = read_audio(x, label)
        if sample_rate is not None and sample_rate != rate:
            raise AudioError(f"{label}: file is at {rate} Hz but sample_rate={sample_rate} was "
                             "given; leave sample_rate unset for files")
        return [_item(data if arrays else _torch().from_numpy(data), rate, target_rate, label,
                      channels)]
    if not (isinstance(x, np.ndarray) or _is_tensor(x)):
        raise AudioError(f"{name}: unsupported audio input of type {type(x).__name__}; expected a "
                         "path, bytes, numpy array or torch tensor")
    rate = sample_rate or target_rate
    if x.ndim not in (1, 2, 3):
        raise AudioError(f"{name}: expected audio of shape [N], [C, N] or [B, C, N], got "
                         f"{x.ndim}-D shape {tuple(x.shape)}")
    x = _as_float(x, name, arrays)
    if x.ndim == 3:
        return [_item(x[b], rate, target_rate, f"{name}[{b}]", channels)
                for b in range(x.shape[0])]
    return [_item(x, rate, target_rate, name, channels)]


def _item(x, rate: int, target_rate: int, name: str, want: int = 1) -> AudioItem:
    """x: float32 [N] or [C, N], a torch tensor or a numpy array (the item keeps its kind);
    `want` channels out (1: averaged)."""
    if x.ndim == 1:
        x = x[None]
    channels, n = x.shape
    if n == 0 or channels == 0:
        raise AudioError(f"{name}: empty audio (shape {tuple(x.shape)})")
    if channels > 16 and channels > n:
        raise AudioError(f"{name}: shape {tuple(x.shape)} looks channels-last; pass channels "
                         "first ([C, N])")
    numpy = isinstance(x, np.ndarray)
    bad = ~(np.isfinite(x) if numpy else _torch().isfinite(x))
    if bad.any():
        columns = bad.any(0) if numpy else bad.any(0).cpu().numpy()
        raise AudioError(f"{name}: audio contains NaN or Inf (first at sample "
                         f"{int(np.flatnonzero(columns)[0])})")
    if want == 1:
        out = x.mean(0) if channels > 1 else x[0]
    elif channels == 1:  # mono on every channel
        out = np.repeat(x, want, 0) if numpy else x.expand(want, -1)
    elif channels == want:
        out = x
    else:
        raise AudioError(f"{name}: {channels} channels; this codec takes mono or {want} "
                         "channels")
    if target_rate is not None and rate != target_rate:  # None: keep the input's rate
        if numpy:
            out = resample(out, rate, target_rate)
        else:
            out = _torch().from_numpy(resample(out.cpu().numpy(), rate, target_rate)).to(
                x.device)
    if out.shape[-1] == 0:
        raise AudioError(f"{name}: too short: {n} samples at {rate} Hz give no sample at "
                         f"{target_rate} Hz")
    return AudioItem(np.ascontiguousarray(out) if numpy else out.contiguous(), rate, n, name)


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def collect_files(inputs: Sequence[str | os.PathLike], suffixes: set[str]
                  ) -> list[tuple[Path, Path]]:
    """(file, path relative to its input root) for files and folders (searched recursively)."""
    out = []
    for inp in inputs:
        p = Path(inp)
        if p.is_dir():
            out += [(f, f.relative_to(p)) for f in sorted(p.rglob("*"))
                    if f.is_file() and f.suffix.lower() in suffixes]
        else:
            out.append((p, Path(p.name)))
    return out
