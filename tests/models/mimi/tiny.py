"""The Mimi codec the batch-invariance contract test runs: moshi's small config on random
weights, in the transformers layout."""

import pytest

from tests.models.mimi import reference


def checkpoints(factory) -> dict:
    pytest.importorskip("moshi", reason="moshi is the Mimi test oracle (see .ci/run)")
    model = reference.moshi_model(small=True)
    _, hf = reference.save_both(model, factory.mktemp("mimi_invariance"), True)
    return {"small": hf}
