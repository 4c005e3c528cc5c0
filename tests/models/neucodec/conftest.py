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
    """Harmonics under a moving envelope plus noise, 16 kHz (as the X-Codec2 oracle tests)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000
    f0 = 120 + 40 * rng.random()
    voiced = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t + rng.random() * 6)
    return (0.2 * voiced * envelope + 0.05 * rng.standard_normal(n)).astype(np.float32)


@pytest.fixture(scope="module")
def distill_small(tmp_path_factory):
    """(the package's DistillNeuCodec, its pytorch_model.bin)."""
    m = reference.distill_package_model(reference.DISTILL_SMALL)
    return m, reference.save_package(m, tmp_path_factory.mktemp("distill_small"))
