"""The S2 codec the batch-invariance contract test runs: the golden tiny model."""

from tests.conftest import S2_TINY


def checkpoints(factory) -> dict:
    return {"tiny": S2_TINY / "codec.pth"}
