"""The Qwen3-TTS tokenizer the batch-invariance contract test runs: the reference's small
config on random weights (the one its parity tests build, shared)."""

from tests.models.qwen3_tts.conftest import SMALL_LENGTHS, inputs, run_reference


def checkpoints(factory) -> dict:
    return {"small": run_reference(factory, "small", inputs(SMALL_LENGTHS, 320))["model"]}
