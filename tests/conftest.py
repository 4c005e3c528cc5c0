import ctypes
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

# The suite runs on 2 pytest-xdist workers (pyproject's addopts): one torch thread each, so
# that together they use the machine's 2 cores; alone, 2 threads.
THREADS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2

# glibc's malloc serves blocks of 32 MB or more with a fresh mmap and unmaps them when freed,
# so each of a model's large activations is faulted in page by page every time it is made.
# In this process (mallopt) and in the processes the tests start (GLIBC_TUNABLES), blocks
# under 1 GB come from the heap and up to 2 GB of freed heap stays mapped: the suite's CPU time
# falls by about a sixth (CHANGELOG.md). The `audiotok` command, which turns on PyTorch's huge
# pages, gains little from it (benchmarks/system/malloc_heap.py). What the tests compute does
# not change.
MMAP_THRESHOLD, TRIM_THRESHOLD = 1 << 30, (1 << 31) - 1
if sys.platform == "linux":
    try:
        _libc = ctypes.CDLL("libc.so.6")
        _libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
        _libc.mallopt(-1, TRIM_THRESHOLD)  # M_TRIM_THRESHOLD
        os.environ.setdefault("GLIBC_TUNABLES", f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD}"
                                                f":glibc.malloc.trim_threshold={TRIM_THRESHOLD}")
    except (OSError, AttributeError):  # not glibc
        pass
torch.set_num_threads(THREADS)
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
# The kernel rules of this CPU's class (nn/kernels/rules.py), not a calibration file a
# developer may have saved: the suite's results must not depend on it (set it to test one).
os.environ.setdefault("AUDIOTOK_KERNELS", "default")

# Files that take longest start first, slowest first (xdist hands out whole files in this
# order: --dist loadfile --no-loadscope-reorder), so the workers finish together; the rest
# keep their order. Durations from `pytest --durations=0`, summed per file.
SLOW_FIRST = (
    "tests/server/test_engine.py",
    "tests/models/s3/test_token2wav_stream.py",
    "tests/eval/test_runner.py",
    "tests/models/snac/test_streaming.py",
    "tests/pipeline/test_resume.py",
    "tests/server/test_step_graphs.py",
    "tests/models/neucodec/test_onnx.py",
    "tests/models/qwen3_tts/test_onnx.py",
    "tests/pipeline/test_ray.py",
    "tests/server/test_ray_serve.py",
    "tests/models/mimi/test_onnx.py",
    "tests/models/xcodec2/test_onnx.py",
    "tests/models/encodec/test_onnx.py",
    "tests/models/s3/test_token2wav.py",
    "tests/export/test_onnx.py",
    "tests/models/qwen3_tts/test_parity.py",
    "tests/server/test_serve.py",
    "tests/models/snac/test_parity.py",
    "tests/models/encodec/test_32khz.py",
    "tests/eval/test_report.py",
    "tests/models/s3/test_parity.py",
    "tests/pipeline/test_tokenize.py",
    "tests/models/dac/test_outetts.py",
    "tests/models/encodec/test_48khz.py",
    "tests/models/wavtokenizer/test_onnx.py",
    "tests/models/bicodec/test_onnx.py",
    "tests/models/bicodec/test_parity.py",
    "tests/models/bicodec/test_released.py",
    "tests/test_stream.py",
    "tests/models/dac/test_parity.py",
    "tests/server/test_page.py",
    "tests/models/qwen3_tts/test_streaming.py",
)


@pytest.fixture(autouse=True)
def _suite_threads():
    """Each test ends with the suite's torch threads: what a test runs can change the count
    (a suite run found a worker at 2 after tests/eval/test_metrics.py's first test), and a
    worker at 2 beside another oversubscribes the 2 cores for all its later tests."""
    yield
    if torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    root = Path(__file__).parent.parent
    items.sort(key=lambda item: rank.get(
        str(Path(item.fspath).relative_to(root)), len(SLOW_FIRST)))

DATA = Path(__file__).parent / "data"
S2_TINY = DATA / "s2_tiny"


@pytest.fixture(scope="session")
def s2_golden():
    with np.load(S2_TINY / "expected_pth.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="session")
def s2_codec():
    import audiotok

    return audiotok.load(S2_TINY / "codec.pth")


XCODEC2_TINY = DATA / "xcodec2_tiny"
XCODEC2_CASES = ["n8000", "n8001", "n319", "n49120", "n144000"]


@pytest.fixture(scope="session")
def xc_golden():
    with np.load(XCODEC2_TINY / "cases.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="session")
def xc_codec():
    import audiotok

    return audiotok.load(XCODEC2_TINY / "hf")
