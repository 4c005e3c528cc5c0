"""The local engine: worker processes read and resample, the main thread encodes length-bucketed
batches on the model's device, a background thread writes shards."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor

import torch

from .batching import Decoded, Failure, ReadSettings, encode_decoded, read_item
from .shards import OutputDir, ShardResult

LOOKAHEAD_BATCHES = 4  # decoded audio gathered before bucketing: this many batches' worth


def run_local(job) -> None:
    """Tokenize every pending shard of `job` (see run.Job)."""
    pending = job.pending()
    items = [it for _, shard in pending for it in shard]
    gather = LOOKAHEAD_BATCHES * job.batch_seconds * job.codec.input_rate
    with decoded(items, job.read, job.workers) as stream, ShardWriter(job.out) as writer:
        for index, shard in pending:
            result = ShardResult(index)
            buffer: list[Decoded] = []
            buffered = 0  # samples in buffer
            for d in itertools.islice(stream, len(shard)):
                if d.error is not None:
                    result.failures.append(Failure(d.item, d.error))
                    job.progress.update(failed=1)
                    continue
                buffer.append(d)
                buffered += d.samples.size
                if buffered >= gather:
                    _encode(job, buffer, result)
                    buffer, buffered = [], 0
            _encode(job, buffer, result)
            writer.put(result)


def _encode(job, buffer: list[Decoded], result: ShardResult) -> None:
    if not buffer:
        return
    rows, failures = encode_decoded(job.codec, buffer, job.batch_seconds)
    result.rows += rows
    result.failures += failures
    job.progress.update(rows=rows, failed=len(failures))


@contextlib.contextmanager
def decoded(items: list, settings: ReadSettings, workers: int) -> Iterator[Iterable[Decoded]]:
    """Items read and resampled in `workers` processes (0: in this thread), in order, with a
    bounded number in flight."""
    if workers == 0:
        yield (read_item(it, settings) for it in items)
        return
    pool = ProcessPoolExecutor(workers, mp_context=_start_method(), initializer=_reader_init,
                               initargs=(os.getpid(),))
    try:
        yield _in_order(pool, items, settings, ahead=4 * workers)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _start_method():
    """fork on Linux (as torch's DataLoader): workers need not re-import the caller's script, so
    a script without `if __name__ == "__main__":` works; spawn elsewhere."""
    if sys.platform == "linux":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _reader_init(parent: int) -> None:
    """Set up a reader process: it ends when `parent` (the tokenize process) dies, however that
    dies, and runs torch on one thread (it only touches small tensors; one thread also keeps a
    forked child out of the parent's OpenMP pool)."""
    _die_with_parent(parent)
    torch.set_num_threads(1)


def _die_with_parent(parent: int, poll_seconds: float = 0.5) -> None:
    """End this process as soon as `parent` is gone. Linux: the kernel sends SIGKILL when the
    parent dies (PR_SET_PDEATHSIG); elsewhere a daemon thread polls the parent pid. An orphan
    would otherwise wait forever on the pool's pipes, whose write ends it holds itself."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0:  # 1: PR_SET_PDEATHSIG
                if os.getppid() != parent:  # died before the signal was armed
                    os._exit(1)
                return

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="audiotok-parent-watch", daemon=True).start()


def _in_order(pool: ProcessPoolExecutor, items: list, settings: ReadSettings, ahead: int):
    todo = iter(items)
    futures = deque(pool.submit(read_item, it, settings) for it in itertools.islice(todo, ahead))
    while futures:
        done = futures.popleft().result()
        nxt = next(todo, None)
        if nxt is not None:
            futures.append(pool.submit(read_item, nxt, settings))
        yield done


class ShardWriter:
    """Commits shards on a background thread; an error there is raised in the caller."""

    def __init__(self, out: OutputDir, depth: int = 2):
        self.out = out
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="audiotok-shard-writer", daemon=True)

    def __enter__(self) -> ShardWriter:
        self.thread.start()
        return self

    def put(self, result: ShardResult) -> None:
        self._raise()
        self.queue.put(result)

    def _run(self) -> None:
        while (result := self.queue.get()) is not None:
            if self.error is None:
                try:
                    self.out.commit(result)
                except BaseException as e:  # noqa: BLE001 - handed to the main thread
                    self.error = e

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def __exit__(self, *exc) -> None:
        self.queue.put(None)
        self.thread.join()
        if exc[0] is None:
            self._raise()
