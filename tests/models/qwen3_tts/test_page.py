"""The demo page with the codecs of issue 27 served side by side, in a real browser (headless
Chromium, driven by Playwright): the Qwen3-TTS tokenizer (24 kHz, 16 codebooks) and NeuCodec
(16 kHz in, 24 kHz out, one codebook) each reconstruct the shipped speech sample in one request
and streamed. One server and one browser for both (each costs seconds to start)."""

import math

import pytest

from tests.models.neucodec.conftest import small  # noqa: F401
from tests.pipeline.conftest import SPEECH
from tests.server.test_page import (  # noqa: F401
    BLANK,
    NEEDS_CHROMIUM,
    page,
    run,
    run_streamed,
    serving,
    speech_clip,
)

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def server(qwen_small, small):  # noqa: F811
    yield from serving("-m", f"neucodec={small[1]}", model=f"qwen={qwen_small[1]['model']}")


@pytest.mark.parametrize("name, title, codebooks, frame_seconds", [
    ("qwen", "Qwen3-TTS 12 Hz tokenizer", 16, 0.08),
    ("neucodec", "NeuCodec", 1, 0.02),
])
def test_reconstructs_whole_and_streamed(page, name, title, codebooks,  # noqa: F811
                                         frame_seconds, tmp_path):
    option = page.locator(f"#model option[value='{name}']")
    plural = "" if codebooks == 1 else "s"
    assert f"({title}, 24000 Hz, {codebooks} codebook{plural})" in option.inner_text()
    page.select_option("#model", name)
    page.set_input_files("#file", str(SPEECH))
    assert run(page) == "done", page.inner_text("#error")
    result = page.evaluate("window.audiotokResult")
    assert result["frameSeconds"] == frame_seconds
    frames = result["inputSeconds"] / frame_seconds
    # Qwen: ceil(N / 1920) frames; NeuCodec: N // 320 (of the 16 kHz input)
    assert result["frames"] == (math.ceil(frames - 1e-9) if name == "qwen"
                                else math.floor(frames + 1e-9))
    assert abs(result["outputSeconds"] - result["inputSeconds"]) <= frame_seconds
    for canvas in ("spec-orig", "spec-rec", "tokens"):
        assert page.evaluate(BLANK, canvas) > 50, f"{canvas} is blank"
    tokens = page.inner_text("#f-tokens")
    assert f"{result['frames']} frames x {codebooks} codebook{plural} (" in tokens
    run_streamed(page, speech_clip(tmp_path, 2.5))
    page.screenshot(path=str(tmp_path / f"{name}_page.png"), full_page=True)
