"""A small corpus for eval: speech cut to a few lengths and rates, plus bad files."""

from pathlib import Path

import pytest

from tests.pipeline.conftest import make_corpus

# name -> (seconds, sample rate, channels)
EVAL_GOOD = {
    "a/one.wav": (2.5, 44100, 1),
    "a/two.flac": (1.6, 16000, 1),
    "b/three.wav": (2.0, 48000, 2),
    "four.wav": (0.1, 22050, 1),  # too short for the perceptual metrics
}


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("eval-corpus"), EVAL_GOOD)
