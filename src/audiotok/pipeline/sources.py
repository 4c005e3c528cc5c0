"""Where a corpus comes from: a folder tree of audio files, a JSONL/CSV manifest, or a Hugging
Face `datasets` dataset saved to disk. Each becomes one ordered list of items; the order (and so
the shard plan) is the same on every run over the same source."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..audio import AUDIO_SUFFIXES
from ..errors import AudiotokError


class SourceError(AudiotokError, ValueError):
    """A source that cannot be listed: missing, unknown kind, malformed manifest, duplicate ids."""


@dataclass(frozen=True)
class Item:
    """One audio item. `row` is the row of a datasets source (its audio is read from there)."""

    index: int
    id: str
    path: str
    text: str | None = None
    row: int | None = None


@dataclass
class Source:
    kind: str  # "folder", "manifest" or "dataset"
    location: str
    items: list[Item]
    audio_column: str | None = None  # datasets sources only

    def fingerprint(self) -> str:
        """sha256 of the ordered ids: items added, removed or reordered change the shard plan
        (a corpus moved elsewhere does not)."""
        h = hashlib.sha256()
        for it in self.items:
            h.update(f"{it.id}\0".encode())
        return h.hexdigest()


def open_source(location: str | os.PathLike) -> Source:
    """List a folder, a `.jsonl`/`.csv` manifest or a `datasets` dataset saved to disk."""
    path = Path(location)
    if not path.exists():
        raise SourceError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
            return _dataset(path)
        return _folder(path)
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return _manifest(path, _jsonl_rows(path))
    if suffix in (".csv", ".tsv"):
        return _manifest(path, _csv_rows(path, "\t" if suffix == ".tsv" else ","))
    raise SourceError(f"{path}: expected a folder of audio files, a .jsonl or .csv manifest, or a "
                      "datasets folder (save_to_disk)")


def _folder(root: Path) -> Source:
    files = sorted(f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in AUDIO_SUFFIXES)
    items = [Item(i, f.relative_to(root).as_posix(), str(f)) for i, f in enumerate(files)]
    if not items:
        raise SourceError(f"{root}: no audio files ({', '.join(sorted(AUDIO_SUFFIXES))})")
    return Source("folder", str(root), items)


def _jsonl_rows(path: Path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SourceError(f"{path}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise SourceError(f"{path}:{n}: expected a JSON object per line")
            yield n, row


def _csv_rows(path: Path, delimiter: str):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        if not reader.fieldnames or "path" not in reader.fieldnames:
            raise SourceError(f"{path}: the header needs a 'path' column (found "
                              f"{reader.fieldnames or 'none'})")
        yield from enumerate(reader, 2)


def _manifest(path: Path, rows) -> Source:
    items: list[Item] = []
    seen: dict[str, int] = {}
    for n, row in rows:
        audio = row.get("path")
        if not isinstance(audio, str) or not audio:
            raise SourceError(f"{path}:{n}: no 'path' value")
        full = Path(audio) if Path(audio).is_absolute() else path.parent / audio
        item_id = row.get("id")
        item_id = audio if item_id in (None, "") else str(item_id)
        if item_id in seen:
            raise SourceError(f"{path}:{n}: duplicate id {item_id!r} (first on line "
                              f"{seen[item_id]})")
        seen[item_id] = n
        text = row.get("text")
        items.append(Item(len(items), item_id, str(full), None if text is None else str(text)))
    if not items:
        raise SourceError(f"{path}: the manifest lists no items")
    return Source("manifest", str(path), items)


def load_dataset_dir(path: str | os.PathLike, audio_column: str | None = None):
    """(dataset with audio left undecoded as {bytes, path}, the audio column's name)."""
    try:
        import datasets
    except ImportError:
        raise SourceError(f"{path}: reading a datasets folder needs the `datasets` package "
                          "(pip install datasets)") from None
    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        raise SourceError(f"{path}: a DatasetDict (splits {sorted(ds)}); pass one split's folder, "
                          f"e.g. {Path(path) / next(iter(ds))}")
    if audio_column is None:
        audio = [k for k, f in ds.features.items() if isinstance(f, datasets.Audio)]
        if len(audio) != 1:
            raise SourceError(f"{path}: expected one Audio column, found {audio or 'none'} among "
                              f"{list(ds.features)}")
        audio_column = audio[0]
    return ds.cast_column(audio_column, datasets.Audio(decode=False)), audio_column


def _dataset(path: Path) -> Source:
    ds, column = load_dataset_dir(path)
    table = ds.with_format("arrow")[:]  # memory-mapped; only the small columns are read below
    paths = table.column(column).combine_chunks().field("path").to_pylist()
    ids = table.column("id").to_pylist() if "id" in table.column_names else range(len(paths))
    texts = table.column("text").to_pylist() if "text" in table.column_names else None
    items, seen = [], set()
    for i, (item_id, audio_path) in enumerate(zip(ids, paths, strict=True)):
        item_id = str(item_id)
        if item_id in seen:
            raise SourceError(f"{path}: duplicate id {item_id!r} (row {i})")
        seen.add(item_id)
        text = None if texts is None or texts[i] is None else str(texts[i])
        items.append(Item(i, item_id, audio_path or "", text, row=i))
    if not items:
        raise SourceError(f"{path}: the dataset has no rows")
    return Source("dataset", str(path), items, audio_column=column)


def npy_relpath(item_id: str) -> PurePosixPath:
    """Where an item's `.npy` copy goes under the npy folder: its id with the suffix replaced."""
    rel = PurePosixPath(item_id)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        rel = PurePosixPath(hashlib.sha256(item_id.encode()).hexdigest()[:16])
    return rel.with_suffix(".npy") if rel.suffix.lower() in AUDIO_SUFFIXES else \
        rel.with_name(rel.name + ".npy")
