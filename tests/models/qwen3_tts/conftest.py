"""Qwen3-TTS tokenizer fixtures: qwen-tts 0.1.1's tokenizer (reference_run.py, in a child
process with its own transformers 4.57.3 from .refs/qwen-tts, which .ci/run installs) with
random weights, saved in the hub layout, its codes and audio for the inputs below; built once
per session (shared by the xdist workers), small and full size."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = Path(os.environ.get("AUDIOTOK_QWEN_TTS_REF", ROOT / ".refs" / "qwen-tts"))
RUN = Path(__file__).with_name("reference_run.py")
FRAME = 1920
# 1 sample, a frame less one, a frame, a frame and one, 12.5 frames; 12 s + 5 samples (300
# encoder steps: past the 250-step window that only flash-attention 2 keeps)
SMALL_LENGTHS = (1, 1919, 1920, 1921, 24001, 12 * 24000 + 5)
FULL_LENGTHS = (1921, 24001)


def run_reference(factory, size: str, inputs: dict) -> dict:
    """{"model": the saved hub-layout folder, **the reference's results}; run once per session
    (in this run's folder, which the pytest-xdist workers share, under a lock)."""
    if not (REFERENCE / "qwen_tts").is_dir():
        pytest.skip(f"the qwen-tts reference is not installed in {REFERENCE} (see .ci/run)")
    from filelock import FileLock

    run = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's folder sits in the run's folder
        run = run.parent
    tmp = run / f"qwen3_tts_{size}"
    with FileLock(f"{tmp}.lock"):
        if not (tmp / "results.npz").is_file():
            tmp.mkdir(exist_ok=True)
            np.savez(tmp / "inputs.npz", **inputs)
            env = {**os.environ, "PYTHONPATH": str(REFERENCE)}
            r = subprocess.run([sys.executable, str(RUN), str(tmp), size, "0",
                                str(tmp / "inputs.npz")],
                               capture_output=True, text=True, timeout=600, env=env)
            assert r.returncode == 0, r.stderr[-3000:]
    with np.load(tmp / "results.npz") as z:
        return {"model": tmp / "model", **{k: z[k] for k in z.files}}


def noise(n: int, seed: int) -> np.ndarray:
    return (0.2 * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


def inputs(lengths, decode_frames: int) -> dict:
    d = {f"audio_{n}": noise(n, i) for i, n in enumerate(lengths)}
    d["batch_0"], d["batch_1"] = noise(24001, 50), noise(15000, 51)
    d["codes_x"] = np.random.default_rng(7).integers(0, 2048, (decode_frames, 16))
    d["onepass_x"] = d["codes_x"]
    return d


@pytest.fixture(scope="session")
def qwen_small(tmp_path_factory):
    """The small config: 320 frames decoded (past the reference's 300-frame chunks)."""
    d = inputs(SMALL_LENGTHS, 320)
    return d, run_reference(tmp_path_factory, "small", d)


@pytest.fixture(scope="session")
def qwen_full(tmp_path_factory):
    """The released config's sizes."""
    d = inputs(FULL_LENGTHS, 20)
    return d, run_reference(tmp_path_factory, "full", d)
