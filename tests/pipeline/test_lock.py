"""The output folder's writer lock belongs to the process that opened it: another run is refused
while it lives, a forked child never holds it, and it is free the moment its owner dies."""

import os
import signal
import subprocess
import sys
import time

import pytest

from audiotok.pipeline.shards import OutputError, RunLock

HOLD = """
import os, sys, time
from pathlib import Path
from audiotok.pipeline.shards import RunLock
lock = RunLock(Path(sys.argv[1]) / ".lock")
child = os.fork()
if child == 0:  # a helper forked after the lock was taken, as a reader process is
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""


def test_second_holder_in_this_process_is_refused(tmp_path):
    lock = RunLock(tmp_path / ".lock")
    with pytest.raises(OutputError, match=f"another tokenize run is writing here .*{os.getpid()}"):
        RunLock(tmp_path / ".lock")
    lock.release()
    RunLock(tmp_path / ".lock").release()


def test_lock_is_freed_when_its_owner_dies_though_its_child_lives(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE,
                         text=True)
    child = int(p.stdout.readline())
    try:
        with pytest.raises(OutputError, match=f"another tokenize run \\(pid {p.pid}\\)"):
            RunLock(tmp_path / ".lock")
        os.kill(p.pid, signal.SIGKILL)  # the owner alone: its forked child goes on
        p.wait()
        os.kill(child, 0)  # still alive (it would raise ProcessLookupError otherwise)
        deadline = time.monotonic() + 5
        while True:
            try:
                lock = RunLock(tmp_path / ".lock")
                break
            except OutputError:
                assert time.monotonic() < deadline, "the dead owner's lock was never freed"
                time.sleep(0.05)
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
        lock.release()
    finally:
        for pid in (p.pid, child):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
