"""The demo page with a Mimi model, in a real browser (headless Chromium, driven by Playwright):
reconstruct the shipped speech sample in one request and streamed."""

import math

import pytest

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
def server(mimi_files):
    yield from serving(model=str(mimi_files[3]))


def test_mimi_reconstructs_whole_and_streamed(page, tmp_path):  # noqa: F811
    model = page.locator("#model option").first.inner_text()
    assert "(Kyutai Mimi, 24000 Hz, 4 codebooks)" in model
    page.set_input_files("#file", str(SPEECH))
    assert run(page) == "done", page.inner_text("#error")
    result = page.evaluate("window.audiotokResult")
    assert result["frameSeconds"] == 0.08
    assert result["frames"] == math.ceil(result["inputSeconds"] * 12.5 - 1e-9)
    assert abs(result["outputSeconds"] - result["inputSeconds"]) <= result["frameSeconds"]
    for canvas in ("spec-orig", "spec-rec", "tokens"):
        assert page.evaluate(BLANK, canvas) > 50, f"{canvas} is blank"
    assert f"{result['frames']} frames x 4 codebooks" in page.inner_text("#f-tokens")
    run_streamed(page, speech_clip(tmp_path, 2.5))
    page.screenshot(path=str(tmp_path / "mimi_page.png"), full_page=True)
