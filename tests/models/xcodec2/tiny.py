"""The X-Codec2 codec the batch-invariance contract test runs: the golden tiny model."""

from tests.conftest import XCODEC2_TINY


def checkpoints(factory) -> dict:
    return {"tiny": XCODEC2_TINY / "hf"}
