"""Mimi test fixtures: the references (moshi and transformers) on the spec's small config with
random weights, saved in both checkpoint layouts, and audiotok's codec loaded from them; built
once per session."""

import pytest
import torch

from tests.models.mimi import reference


@pytest.fixture(scope="session")
def mimi_files(tmp_path_factory):
    """(moshi model, transformers model, moshi-layout file, transformers folder), small."""
    pytest.importorskip("moshi", reason="moshi is the Mimi test oracle: pip install --no-deps "
                        "moshi==0.2.13 (see .ci/run)")
    pytest.importorskip("transformers")
    model = reference.moshi_model(small=True)
    moshi_file, hf = reference.save_both(model, tmp_path_factory.mktemp("mimi_small"), True)
    return model, reference.hf_model(hf), moshi_file, hf


@pytest.fixture(scope="session")
def mimi_codec(mimi_files):
    import audiotok

    return audiotok.load(mimi_files[3])


def speechy(n: int, seed: int) -> torch.Tensor:
    """[1, 1, n] of noise at speech level (the model's weights are random anyway)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 1, n, generator=g) * 0.1
