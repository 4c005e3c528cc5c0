"""The eval output folder: `run.json` (what the run measures), `results.jsonl` (one line per item
and system, appended as each finishes), `tokens/<system>/<item>.npy`, `audio/<system>/...` for
the examples, and the summary and reports written at the end.

A result line is written whole with one write, flushed and fsynced, so a run killed at any moment
leaves at worst a torn last line, which the next run cuts off and measures again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from ..audio import write_audio
from ..errors import AudiotokError
from ..fileio import atomic_output
from ..pipeline.shards import LockedFolder, load_header

FORMAT = "audiotok-eval"
FORMAT_VERSION = 1
RUN = "run.json"
RESULTS = "results.jsonl"
TOKENS = "tokens"
AUDIO = "audio"
# run.json fields that must match to continue a folder
BINDING = ("format", "source_fingerprint", "num_items", "metrics", "systems", "settings")
# files a run writes (and --overwrite removes)
OUTPUTS = (RUN, RESULTS, "summary.json", "report.md", "report.html", TOKENS, AUDIO, "figures")


class EvalOutputError(AudiotokError, ValueError):
    """An output folder that cannot be used: other settings, locked, not an eval folder."""


def slug(name: str) -> str:
    """A file-system-safe folder name for a system or item name (unique: hashed when changed)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._") or "x"
    if safe != name:
        safe += "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return safe


class ResultsDir(LockedFolder):
    """An eval folder opened for one run (holds the folder's lock until close)."""

    what = "eval"
    error = EvalOutputError

    def _open(self, header: dict, overwrite: bool) -> None:
        old = self._read_run()
        if old is not None and overwrite:
            for name in OUTPUTS:
                path = self.root / name
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
            old = None
        elif old is None and (self.root / RESULTS).exists():
            raise EvalOutputError(f"{self.root}: holds {RESULTS} but no {RUN}; pass --overwrite "
                                  "to start again")
        if old is not None:
            _check_same(self.root, old, header)
        self.header = header
        with atomic_output(self.root / RUN) as tmp:
            tmp.write_text(json.dumps(header, indent=1) + "\n")
        self.results = read_results(self.root, repair=True)
        self.done = {(r["id"], r["system"]) for r in self.results}
        self._file = open(self.root / RESULTS, "a", encoding="utf-8")  # noqa: SIM115

    def _read_run(self) -> dict | None:
        path = self.root / RUN
        if not path.exists():
            return None
        return load_header(path, FORMAT, EvalOutputError, "eval run file")

    def append(self, result: dict) -> None:
        """Record one finished (item, system): one line, written whole and synced."""
        line = json.dumps(result, allow_nan=False) + "\n"
        self._file.write(line)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.results.append(result)
        self.done.add((result["id"], result["system"]))

    def tokens_path(self, system: str, index: int) -> Path:
        return self.root / TOKENS / slug(system) / f"{index:08d}.npy"

    def save_tokens(self, system: str, index: int, tokens: np.ndarray) -> None:
        path = self.tokens_path(system, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as tmp, open(tmp, "wb") as f:
            np.save(f, tokens)

    def close(self) -> None:
        if getattr(self, "_file", None) is not None:
            self._file.close()
            self._file = None
        self._lock.release()


def read_results(root: str | os.PathLike, *, repair: bool = False) -> list[dict]:
    """The result lines of a folder. A torn last line (a run killed while writing it) is dropped,
    and with repair=True cut off the file; a bad line elsewhere is an error."""
    path = Path(root) / RESULTS
    if not path.exists():
        return []
    data = path.read_bytes()
    complete = data.rfind(b"\n") + 1  # every write ends with a newline; past it: a torn line
    results = []
    for n, line in enumerate(data[:complete].split(b"\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            results.append(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise EvalOutputError(f"{path}: line {n} is not JSON") from None
    if repair and complete < len(data):
        with open(path, "r+b") as f:
            f.truncate(complete)
    return results


def _check_same(root: Path, old: dict, new: dict) -> None:
    changed = []
    for key in BINDING:
        if old.get(key) != new.get(key):
            changed.append(f"{key}: {_short(old.get(key))} -> {_short(new.get(key))}")
    if changed:
        raise EvalOutputError(f"{root} holds an eval run with other settings ({'; '.join(changed)})"
                              "; pass --overwrite to replace it, or choose another output folder")


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


def example_path(root: Path, system: str, index: int) -> Path:
    """Where an example's audio lives in a results folder."""
    return root / AUDIO / slug(system) / f"{index:08d}.wav"


def save_example(root: Path, system: str, index: int, audio: np.ndarray, rate: int) -> None:
    write_audio(example_path(root, system, index), audio, rate, subtype="FLOAT")
