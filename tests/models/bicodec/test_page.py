"""The demo page with BiCodec: its codes carry the 32 global tokens, which the page sends with
the offline decode and in the decode stream's start message (headless Chromium)."""

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")
from tests.pipeline.conftest import SPEECH  # noqa: E402
from tests.server import test_page as pages  # noqa: E402

pytestmark = pages.NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def page(spark):
    for base in pages.serving(model=str(spark("tiny").folder)):
        yield from pages.open_page(base)


def test_reconstruct_offline_and_streamed(page, tmp_path):
    page.set_input_files("#file", str(SPEECH))
    assert pages.run(page) == "done", page.inner_text("#error")
    result = page.evaluate("window.audiotokResult")
    assert abs(result["outputSeconds"] - result["inputSeconds"]) <= 2 * result["frameSeconds"]
    pages.run_streamed(page, pages.speech_clip(tmp_path, 2.5))
