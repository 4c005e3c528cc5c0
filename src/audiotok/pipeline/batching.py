"""The work on items, shared by every engine: read and resample one item (in a worker process),
group decoded items of similar length into batches, encode a batch into output rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ..audio import to_items
from ..errors import AudiotokError
from .sources import Item, load_dataset_dir


@dataclass
class Decoded:
    """An item's mono audio at the codec's rate, or why it could not be read."""

    item: Item
    samples: np.ndarray | None  # float32 [N]
    source_rate: int = 0
    source_samples: int = 0
    error: str | None = None


@dataclass(frozen=True)
class ReadSettings:
    target_rate: int | None  # None: keep each item's own rate
    min_seconds: float = 0.0
    dataset: str | None = None  # datasets folder, for items with a row
    audio_column: str | None = None


def read_item(item: Item, settings: ReadSettings) -> Decoded:
    """Read, downmix and resample one item; errors become Decoded.error (one line)."""
    try:
        data = _dataset_audio(settings, item.row) if item.row is not None else item.path
        it = to_items(data, None, settings.target_rate)[0]
        seconds = it.source_samples / it.source_rate
        if seconds < settings.min_seconds:
            raise AudiotokError(f"too short: {seconds:.3f} s (--min-seconds "
                                f"{settings.min_seconds:g})")
        return Decoded(item, it.samples.numpy(), it.source_rate, it.source_samples)
    except Exception as e:  # noqa: BLE001 - any failure of one item is that item's error
        return Decoded(item, None, error=one_line(e, item))


def _dataset_audio(settings: ReadSettings, row: int) -> bytes | str:
    audio = _open_dataset(settings.dataset, settings.audio_column)[row][settings.audio_column]
    if audio is None:
        raise AudiotokError("no audio in this row")
    if audio.get("bytes"):
        return audio["bytes"]
    if audio.get("path"):
        return audio["path"]
    raise AudiotokError("the audio value has neither bytes nor a path")


@lru_cache(maxsize=2)
def _open_dataset(path: str, column: str):
    return load_dataset_dir(path, column)[0]


def one_line(e: BaseException, item: Item) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    if not isinstance(e, AudiotokError):
        text = f"{type(e).__name__}: {text}"
    return text.replace(f"{item.path}: ", "") if item.path else text


def buckets(lengths: Sequence[int], max_samples: int) -> list[list[int]]:
    """Indices of `lengths` in batches of similar length, shortest first, each batch's padded
    size (longest item x count) within `max_samples`; a longer item is a batch of its own."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and lengths[i] * (len(current) + 1) > max_samples:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@dataclass
class Row:
    """One output row (see shards.SCHEMA)."""

    item: Item
    tokens: np.ndarray  # [K, T]
    n_samples: int
    sample_rate: int
    globals: np.ndarray | None = None  # [G]: the utterance tokens (a codec that has them)


@dataclass
class Failure:
    item: Item
    reason: str


def encode_batch(codec, batch: list[Decoded]) -> tuple[list[Row], list[Failure]]:
    """Encode decoded items together (tokens equal each item's own encode); if the batch fails,
    encode one by one so a failure is charged to its item only."""
    try:
        codes = codec.encode([torch.from_numpy(d.samples) for d in batch])
    except Exception as e:  # noqa: BLE001 - one item's failure is that item's error
        if len(batch) == 1:
            return [], [Failure(batch[0].item, one_line(e, batch[0].item))]
        rows, failures = [], []
        for d in batch:
            r, f = encode_batch(codec, [d])
            rows += r
            failures += f
        return rows, failures
    tokens = codes.tokens.numpy()
    utterance = None if codes.globals is None else codes.globals.numpy()
    rows = [Row(d.item, tokens[i, :, : int(n)], d.source_samples, d.source_rate,
                None if utterance is None else utterance[i])
            for i, (d, n) in enumerate(zip(batch, codes.lengths.tolist(), strict=True))]
    return rows, []


def encode_decoded(codec, decoded: list[Decoded], batch_seconds: float
                   ) -> tuple[list[Row], list[Failure]]:
    """Bucket by length into batches of about `batch_seconds` of audio (0: one item per batch)
    and encode each."""
    rows: list[Row] = []
    failures: list[Failure] = []
    lengths = [d.samples.size for d in decoded]
    max_samples = max(1, int(batch_seconds * codec.input_rate))
    for batch in buckets(lengths, max_samples):
        r, f = encode_batch(codec, [decoded[i] for i in batch])
        rows += r
        failures += f
    return rows, failures
