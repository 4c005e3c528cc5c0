import os
from pathlib import Path

import numpy as np
import pytest
import torch

torch.set_num_threads(2)
os.environ.setdefault("OMP_NUM_THREADS", "2")

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
