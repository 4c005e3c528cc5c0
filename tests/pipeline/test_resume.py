"""Kill a tokenize run (SIGKILL) at random moments, rerun each time: the final dataset equals a
clean run's, item for item, shard file for shard file. The kill takes the whole process group, or
the main process alone (as the OOM killer or `kill -9 PID` does): its reader processes must then
end by themselves and leave the folder free for the rerun."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline.conftest import GOOD, S2_MODEL, make_corpus, read_output

pytest.importorskip("pyarrow")


def command(corpus, out):
    return [sys.executable, "-m", "audiotok", "tokenize", str(corpus), "-m", S2_MODEL,
            "-o", str(out), "--shard-items", "2", "--workers", "2", "--batch-seconds", "2",
            "--threads", "1", "-q"]


def shards_done(out) -> int:
    try:
        return len(json.loads((out / "manifest.json").read_text())["shards"])
    except (OSError, ValueError):
        return 0


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            pids.append(int(stat.parent.name))
    return pids


def run_until(cmd, out, kill_after_shards: int | None, delay: float,
              group: bool = True) -> int | None:
    """Run; once the manifest lists `kill_after_shards` shards (None: never), wait `delay` s and
    SIGKILL the whole process group, or the main process alone. The exit status, or None when
    killed; then no process of the run may be left 5 s after the kill."""
    p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    while p.poll() is None:
        if kill_after_shards is not None and shards_done(out) >= kill_after_shards:
            time.sleep(delay)
            if group:
                os.killpg(p.pid, signal.SIGKILL)
            else:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()
            deadline = time.monotonic() + 5
            while (left := group_members(p.pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not left, f"processes of the killed run still alive: {left}"
            return None
        time.sleep(0.01)
    return p.returncode


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """(a corpus of 32 good items and 3 bad ones, a clean run's output folder)."""
    tmp = tmp_path_factory.mktemp("resume")
    big = {f"d{i % 3}/item{i:02d}.wav": (0.5 + 0.25 * (i % 7), 44100, 1) for i in range(24)}
    corpus = make_corpus(tmp / "corpus", good={**GOOD, **big})
    assert run_until(command(corpus, tmp / "clean"), tmp / "clean", None, 0) == 3
    return corpus, tmp / "clean"


@pytest.mark.parametrize("group", [True, False], ids=["process-group", "main-process"])
def test_sigkill_and_resume(clean_run, tmp_path, group):
    corpus, clean_out = clean_run
    clean = read_output(clean_out)
    assert len(clean["rows"]) == 32 and clean["manifest"]["num_shards"] == 18

    out = tmp_path / "resumed"
    rng = random.Random(1234)
    # kill while starting (0 shards), then at random points further on, each at a random delay;
    # the last kill leaves at least 6 of the 18 shards (a delay of up to 0.2 s can let a run
    # write two more shards before the kill lands: 16 left none, and nothing to resume)
    targets = [0] + sorted(rng.sample(range(1, 13), 4))
    seen = []
    for target in targets:
        status = run_until(command(corpus, out), out, target, rng.uniform(0, 0.2), group)
        seen.append((target, status, shards_done(out)))
        assert status is None, seen  # killed before the end
    # no run ever loses a finished shard
    assert all(a[2] <= b[2] for a, b in zip(seen, seen[1:], strict=False)), seen
    assert 0 < seen[-1][2] < 18, seen
    assert run_until(command(corpus, out), out, None, 0) == 3
    resumed = read_output(out)
    assert resumed["rows"] == clean["rows"]
    assert resumed["manifest"]["shards"] == clean["manifest"]["shards"]  # byte-identical shards
    assert (out / "errors.jsonl").read_text() == (clean_out / "errors.jsonl").read_text()
    assert not list(out.rglob("*.tmp"))
