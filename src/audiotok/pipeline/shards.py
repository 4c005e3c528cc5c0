"""The output folder: Parquet shards committed atomically, `manifest.json` listing the finished
ones, `errors.jsonl`, optional per-item `.npy` copies. Only this module writes there.

A shard is committed in this order: its `.npy` copies, the Parquet file (temp + rename), then its
manifest entry (temp + rename). A shard counts as done only once it is in the manifest, so a run
killed at any moment leaves at worst a shard file that the next run writes again."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..codes import save_npy
from ..errors import AudiotokError
from ..fileio import atomic_output
from .batching import Failure, Row
from .sources import npy_relpath

FORMAT = "audiotok-tokens"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
NPY_DIR = "npy"
# Header fields that must match to continue an existing output folder.
BINDING = ("format", "codec", "model_sha256", "settings", "source_fingerprint", "num_items")


class OutputError(AudiotokError, ValueError):
    """An output folder that cannot be used: other settings, locked by another run."""


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise OutputError("tokenize writes Parquet with pyarrow: pip install 'audiotok[corpus]' "
                          "(or pip install pyarrow)") from None
    return pa, pq


def schema(token_type: str, metadata: dict, llm: bool = False, utterance: bool = False):
    """The shard schema; with llm, an `llm_ids` column (a language model's token ids); with
    utterance, a `globals` column (each item's utterance tokens, Codes.globals)."""
    pa, _ = _pyarrow()
    return pa.schema([
        ("id", pa.string()), ("path", pa.string()), ("text", pa.string()),
        ("tokens", pa.list_(getattr(pa, token_type)())), ("num_codebooks", pa.int32()),
        ("n_frames", pa.int64()), ("n_samples", pa.int64()), ("sample_rate", pa.int32()),
        ("duration", pa.float64()),
    ] + ([("globals", pa.list_(pa.int64()))] if utterance else [])
      + ([("llm_ids", pa.list_(pa.int64()))] if llm else []),
        metadata={"audiotok": json.dumps(metadata, sort_keys=True)})


def token_type(codebook_sizes) -> str:
    """The smallest unsigned pyarrow/numpy type name that holds every token."""
    top = max(codebook_sizes) - 1
    return next(t for t, bits in (("uint8", 8), ("uint16", 16), ("uint32", 32)) if top < 2**bits)


@dataclass
class ShardResult:
    index: int
    rows: list[Row] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


class LockedFolder:
    """An output folder opened by one run: created if missing, locked (RunLock) until close,
    then `_open(header, overwrite)` checks or starts what the folder holds."""

    what = "tokenize"  # the kind of run, for the lock's message
    error: type[AudiotokError] = None  # raised for an unusable folder (set below)

    def __init__(self, root: str | os.PathLike, header: dict, *, overwrite: bool = False):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise self.error(f"{self.root}: exists and is not a folder")
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = RunLock(self.root / ".lock", self.what)
        try:
            self._open(header, overwrite)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, header: dict, overwrite: bool) -> None:
        raise NotImplementedError


class OutputDir(LockedFolder):
    """A tokenize output folder opened for one run (holds an exclusive lock until close).
    `llm`: a token-id scheme (export.llm) whose ids each row also gets, or None."""

    error = OutputError
    llm = None

    def _open(self, header: dict, overwrite: bool) -> None:
        self.header = header
        old = self._read_manifest()
        if old is not None and overwrite:
            self._clear(old)
            old = None
        if old is not None:
            _check_same(self.root, old, header)
        self.shards: dict[int, dict] = {s["index"]: s for s in (old or {}).get("shards", [])}
        self._remove_temp_files()
        self._write_manifest()
        self._write_errors()

    # -- state ---------------------------------------------------------------------------------
    def done(self, index: int) -> bool:
        return index in self.shards

    @property
    def num_shards(self) -> int:
        return self.header["num_shards"]

    def shard_name(self, index: int) -> str:
        width = max(5, len(str(self.num_shards - 1)))
        return f"shard-{index:0{width}d}.parquet"

    def failures(self) -> list[dict]:
        return [e for i in sorted(self.shards) for e in self.shards[i]["errors"]]

    # -- commit --------------------------------------------------------------------------------
    def commit(self, result: ShardResult) -> None:
        """Write one finished shard (rows in source order) and record it in the manifest."""
        _, pq = _pyarrow()
        rows = sorted(result.rows, key=lambda r: r.item.index)
        if self.header["settings"]["npy"]:
            for r in rows:
                save_npy(self.root / NPY_DIR / npy_relpath(r.item.id), r.tokens)
        name = self.shard_name(result.index)
        with atomic_output(self.root / name) as tmp:
            pq.write_table(self._table(rows), tmp)
            digest = _sha256(tmp)
        errors = [{"id": f.item.id, "path": f.item.path, "reason": f.reason}
                  for f in sorted(result.failures, key=lambda f: f.item.index)]
        self.shards[result.index] = {
            "index": result.index, "file": name, "rows": len(rows), "sha256": digest,
            "audio_seconds": round(sum(r.n_samples / r.sample_rate for r in rows), 3),
            "errors": errors}
        self._write_manifest()
        if errors:
            self._write_errors()

    def _table(self, rows: list[Row]):
        pa, _ = _pyarrow()
        kind = self.header["token_type"]
        flat = [r.tokens.reshape(-1).astype(kind) for r in rows]
        offsets = np.concatenate([[0], np.cumsum([f.size for f in flat])]).astype(np.int32)
        values = np.concatenate(flat) if flat else np.zeros(0, kind)
        columns = {
            "id": [r.item.id for r in rows],
            "path": [r.item.path for r in rows],
            "text": [r.item.text for r in rows],
            "tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
            "num_codebooks": [int(r.tokens.shape[0]) for r in rows],
            "n_frames": [int(r.tokens.shape[1]) for r in rows],
            "n_samples": [r.n_samples for r in rows],
            "sample_rate": [r.sample_rate for r in rows],
            "duration": [r.n_samples / r.sample_rate for r in rows],
        }
        utterance = bool(self.header.get("global_tokens"))
        if utterance:
            columns["globals"] = [r.globals.astype(np.int64).tolist() for r in rows]
        if self.llm is not None:
            ids = [self.llm.sequence(r.tokens, r.globals) if utterance else
                   self.llm.sequence(r.tokens) for r in rows]
            offsets = np.concatenate([[0], np.cumsum([i.size for i in ids])]).astype(np.int32)
            columns["llm_ids"] = pa.ListArray.from_arrays(
                pa.array(offsets), pa.array(np.concatenate(ids) if ids else np.zeros(0, np.int64)))
        meta = {k: v for k, v in self.header.items() if k != "num_shards"}
        return pa.table(columns, schema=schema(kind, meta, self.llm is not None, utterance))

    # -- files ---------------------------------------------------------------------------------
    def _read_manifest(self) -> dict | None:
        if not (self.root / MANIFEST).exists():
            leftovers = [p.name for p in self.root.iterdir() if not p.name.startswith(".")]
            if leftovers:
                raise OutputError(f"{self.root}: not empty and not a tokenize output (no "
                                  f"{MANIFEST}; found {', '.join(sorted(leftovers)[:5])})")
            return None
        return _load_manifest(self.root / MANIFEST)

    def _write_manifest(self) -> None:
        shards = [self.shards[i] for i in sorted(self.shards)]
        manifest = {**self.header, "complete": len(shards) == self.num_shards,
                    "rows": sum(s["rows"] for s in shards),
                    "failed": sum(len(s["errors"]) for s in shards), "shards": shards}
        with atomic_output(self.root / MANIFEST) as tmp:
            tmp.write_text(json.dumps(manifest, indent=1) + "\n")

    def _write_errors(self) -> None:
        with atomic_output(self.root / ERRORS) as tmp:
            tmp.write_text("".join(json.dumps(e) + "\n" for e in self.failures()))

    def _clear(self, manifest: dict) -> None:
        """--overwrite: remove what an earlier run wrote (only files of ours)."""
        for s in manifest.get("shards", []):
            (self.root / s["file"]).unlink(missing_ok=True)
        for p in self.root.glob("shard-*.parquet"):
            p.unlink()
        for name in (MANIFEST, ERRORS):
            (self.root / name).unlink(missing_ok=True)
        npy = self.root / NPY_DIR
        if npy.is_dir():
            for p in sorted(npy.rglob("*"), reverse=True):
                p.unlink() if p.is_file() else p.rmdir()
            npy.rmdir()

    def _remove_temp_files(self) -> None:
        """Temporary files of a run that was killed (atomic_output names them .NAME.*.tmp)."""
        for p in self.root.rglob(".*.tmp"):
            p.unlink(missing_ok=True)

    def close(self) -> None:
        self._lock.release()


class RunLock:
    """The folder's writer lock, owned by this process alone.

    A POSIX record lock (lockf): the kernel drops it when the process dies, however it dies, and
    a forked child (a reader process) does not inherit it, so a helper that outlives its parent
    can never hold a folder. Record locks do not exclude a second holder in the same process, so
    this process's own holders are kept in a set as well. The holder's pid is written in the file
    for the message."""

    _held: set[str] = set()
    _guard = threading.Lock()
    file = None

    def __init__(self, path: Path, what: str = "tokenize"):
        self.key = str(path.resolve())
        with self._guard:
            if self.key in self._held:
                raise OutputError(f"{path.parent}: another {what} run is writing here "
                                  f"(in this process, pid {os.getpid()})")
            f = open(path, "a+")  # noqa: SIM115 - held until release(); "a+" keeps the pid
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                f.seek(0)
                holder = f.read().strip()
                f.close()
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise OutputError(f"{path}: cannot lock: {e.strerror}") from None
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise OutputError(f"{path.parent}: another {what} run{who} is writing "
                                  "here") from None
            f.truncate(0)
            f.write(f"{os.getpid()}\n")
            f.flush()
            self.file = f
            self._held.add(self.key)

    def __del__(self):
        self.release()

    def release(self) -> None:
        with self._guard:
            if self.file is not None:
                self.file.close()  # closing the descriptor drops the record lock
                self.file = None
                self._held.discard(self.key)


def _load_manifest(path: Path) -> dict:
    return load_header(path, FORMAT, OutputError, "tokenize manifest")


def load_header(path: Path, fmt: str, error: type[AudiotokError], what: str) -> dict:
    """The JSON object in `path`, which must say {"format": fmt}; else `error`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise error(f"{path}: unreadable {what} ({e})") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise error(f"{path}: not an audiotok {what}")
    return data


def recorded_settings(root: str | os.PathLike) -> dict:
    """The settings an earlier run recorded in the output folder `root` ({} if there is none;
    a folder that cannot be used is reported when it is opened)."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        return {}
    try:
        settings = _load_manifest(path).get("settings")
    except OutputError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _check_same(root: Path, old: dict, new: dict) -> None:
    changed = []
    for key in BINDING:
        if key == "settings":
            changed += [f"{k}: {old[key].get(k)!r} -> {v!r}" for k, v in new[key].items()
                        if old[key].get(k) != v]
        elif old.get(key) != new.get(key):
            changed.append(f"{key}: {old.get(key)!r} -> {new.get(key)!r}")
    if changed:
        raise OutputError(f"{root} holds a run with other settings ({'; '.join(changed)}); pass "
                          "--overwrite to replace it, or choose another output folder")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
