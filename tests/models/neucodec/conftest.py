"""NeuCodec fixtures: the neucodec package's model at the small size with random weights
(reference.py), saved as the package's pytorch_model.bin; built once per test module."""

import numpy as np
import pytest

from tests.models.neucodec import reference


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(the package's model, its pytorch_model.bin)."""
    m = reference.package_model(reference.SMALL)
    return m, reference.save_package(m, tmp_path_factory.mktemp("neucodec_small"))


def speech_like(n: int, seed: int) -> np.ndarray:
    """Harmonics under a moving envelope plus noise at 16 kHz (the X-Codec2 oracle tests'
    signal), four times as loud."""
    from tests.models.xcodec2.test_oracle import signal

    return 4 * signal(n, seed)


@pytest.fixture(scope="module")
def distill_small(tmp_path_factory):
    """(the package's DistillNeuCodec, its pytorch_model.bin)."""
    m = reference.distill_package_model(reference.DISTILL_SMALL)
    return m, reference.save_package(m, tmp_path_factory.mktemp("distill_small"))
