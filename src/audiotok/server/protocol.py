"""Wire formats of the server: PCM sample formats, streamed WAV headers, token messages.

Binary token messages (WebSocket): int32 little-endian, frame-major: frame 0's K codes, then
frame 1's, ... (what a speech LLM emits frame by frame); the length must be a multiple of 4 K
bytes. Token arrays in JSON are codebook-major, [K, t] (as everywhere in audiotok).
"""

from __future__ import annotations

import io
import json
import struct

import numpy as np

from ..codes import load_codes_bytes
from ..errors import AudioError, CodesError

SAMPLE_FORMATS = ("f32le", "s16le")


def pcm_bytes(audio: np.ndarray, sample_format: str) -> bytes:
    """Audio [n] or [C, n] as PCM bytes, channels interleaved."""
    if audio.ndim == 2:
        audio = audio.T
    if sample_format == "s16le":
        return (np.clip(audio, -1, 1) * 32767).round().astype("<i2").tobytes()
    return audio.astype("<f4").tobytes()


def pcm_samples(data: bytes, sample_format: str) -> np.ndarray:
    width = 2 if sample_format == "s16le" else 4
    if len(data) % width:
        raise AudioError(f"{sample_format} PCM must be a whole number of {width}-byte samples, "
                         f"got {len(data)} bytes")
    if sample_format == "s16le":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768
    return np.frombuffer(data, "<f4").astype(np.float32)


def check_sample_format(name: str) -> str:
    if name not in SAMPLE_FORMATS:
        raise AudioError(f"unknown sample_format {name!r}; expected one of "
                         f"{', '.join(SAMPLE_FORMATS)}")
    return name


def interleaved(x: np.ndarray, channels: int) -> np.ndarray:
    """Interleaved samples [n * C] as [C, n] (mono: [n] as it is)."""
    if channels == 1:
        return x
    if x.size % channels:
        raise AudioError(f"{x.size} samples do not split into {channels} channels")
    return np.ascontiguousarray(x.reshape(-1, channels).T)


def streaming_wav_header(sample_rate: int, sample_format: str) -> bytes:
    """A WAV header for a stream of unknown length: RIFF and data sizes are 0xFFFFFFFF."""
    if sample_format == "s16le":
        fmt_tag, bits = 1, 16
    else:
        fmt_tag, bits = 3, 32
    block = bits // 8
    return (b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVE" + b"fmt " +
            struct.pack("<IHHIIHH", 16, fmt_tag, 1, sample_rate, sample_rate * block, block,
                        bits) + b"data" + struct.pack("<I", 0xFFFFFFFF))


def tokens_from_binary(data: bytes, num_codebooks: int) -> np.ndarray:
    """[K, t] int64 from a binary token message."""
    step = 4 * num_codebooks
    if not data or len(data) % step:
        raise CodesError(f"a binary token message holds whole frames of {num_codebooks} int32 "
                         f"codes ({step} bytes each); got {len(data)} bytes")
    return np.frombuffer(data, "<i4").reshape(-1, num_codebooks).T.astype(np.int64)


def ids_from_binary(data: bytes) -> np.ndarray:
    """Language model ids [n] int64 from a binary ids message (int32 LE, any count)."""
    if not data or len(data) % 4:
        raise CodesError(f"a binary ids message holds int32 ids (4 bytes each); got "
                         f"{len(data)} bytes")
    return np.frombuffer(data, "<i4").astype(np.int64)


def ids_from_json(value) -> np.ndarray:
    """A JSON list of integer ids as int64 [n]."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise CodesError("ids must be a list of integers")
    try:
        return np.asarray(value, dtype=np.int64).reshape(-1)
    except OverflowError:
        raise CodesError("an id is outside the int64 range") from None


def tokens_to_binary(tokens: np.ndarray) -> bytes:
    return np.ascontiguousarray(np.asarray(tokens).T, dtype="<i4").tobytes()


def tokens_from_json(value) -> np.ndarray:
    """A nested list of integers as an int64 array ([K, t] or [B, K, t])."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise CodesError("tokens must be a rectangular nested list of integers") from None
    if arr.dtype == object or arr.ndim not in (2, 3):
        raise CodesError(f"tokens must be a rectangular [K, T] or [B, K, T] list of integers, "
                         f"got {'a ragged list' if arr.dtype == object else f'{arr.ndim} dims'}")
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise CodesError(f"tokens must be integers, got {arr.dtype} values")
    return arr.astype(np.int64)


def codes_from_body(body: bytes, content_type: str) -> tuple[np.ndarray, np.ndarray | None,
                                                              dict]:
    """(tokens [B, K, T] int64, num_samples [B] or None, JSON options) from a decode body:
    JSON {"tokens": ..., "num_samples"?, "scales"?, "globals"?, ...}, a .npy file ([K, T]) or
    a .codes archive. Segment scales and utterance tokens (codes that carry them) come as the
    options' "scales" / "globals": [S] or [B, S] in JSON, the archive's [B, S]."""
    if content_type.startswith("application/json") or body[:1] in (b"{", b"["):
        try:
            doc = json.loads(body)
        except (UnicodeDecodeError, ValueError) as e:
            raise CodesError(f"the body is not valid JSON ({e})") from None
        if not isinstance(doc, dict) or "tokens" not in doc:
            raise CodesError('a JSON body must be an object with a "tokens" key')
        tokens = tokens_from_json(doc["tokens"])
        if tokens.ndim == 2:
            tokens = tokens[None]
        ns = doc.get("num_samples")
        if ns is not None:
            ns = np.atleast_1d(np.asarray(ns))
            if ns.dtype.kind not in "iu" or ns.shape != (tokens.shape[0],):
                raise CodesError(f"num_samples must be {tokens.shape[0]} integer(s)")
        return tokens, ns, doc
    if body[:6] == b"\x93NUMPY":
        try:
            arr = np.load(io.BytesIO(body), allow_pickle=False)
        except (ValueError, OSError) as e:
            raise CodesError(f"unreadable .npy body ({e})") from None
        if arr.dtype.kind not in "iu" or arr.ndim not in (2, 3):
            raise CodesError(f".npy tokens must be integer [K, T] or [B, K, T], got "
                             f"{arr.dtype} {arr.shape}")
        arr = arr.astype(np.int64)
        return (arr[None] if arr.ndim == 2 else arr), None, {}
    codes = load_codes_bytes(body)
    tokens = codes.tokens.numpy()
    lengths = codes.lengths.tolist()
    if len(set(lengths)) != 1 or lengths[0] != tokens.shape[-1]:
        raise CodesError("a .codes body with items of different lengths: send them one by one")
    ns = None if codes.num_samples is None else codes.num_samples.numpy()
    doc = {"codec": codes.codec}
    if codes.scales is not None:
        doc["scales"] = codes.scales.numpy()
    if codes.globals is not None:
        doc["globals"] = codes.globals.numpy()
    return tokens, ns, doc
