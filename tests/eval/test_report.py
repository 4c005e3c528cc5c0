"""The HTML report in a real browser (headless Chromium via Playwright): its tables, figures and
audio players render. Set AUDIOTOK_EVAL_SCREENSHOT=PATH to save the page there (README)."""

import os
import shutil

import pytest

from audiotok.eval import evaluate
from tests.pipeline.conftest import S2_MODEL, XC_MODEL

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install "
                                                          "chromium)")

IMAGE_RANGE = """(img) => {
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let lo = 255, hi = 0;
  for (let i = 0; i < d.length; i += 4) { lo = Math.min(lo, d[i]); hi = Math.max(hi, d[i]); }
  return hi - lo;
}"""

DURATIONS = """async () => Promise.all([...document.querySelectorAll('audio')].map(a =>
  a.readyState >= 1 ? a.duration : new Promise((ok, bad) => {
    a.addEventListener('loadedmetadata', () => ok(a.duration));
    a.addEventListener('error', () => bad('audio did not load'));
    a.load();
  })))"""


def test_report_renders(corpus, tmp_path):
    out = tmp_path / "out"
    evaluate(corpus, [S2_MODEL, XC_MODEL, "opus:6k"], out, examples=2, progress=False)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((out / "report.html").as_uri())
        page.wait_for_load_state("load")
        tables = page.locator("table")
        assert tables.count() == 5  # results, metrics, 2 x tokens, skipped and failed
        header = tables.nth(0).locator("th").all_inner_texts()
        assert header == ["metric", "s2_tiny", "xcodec2_tiny", "opus:6k"]
        rows = tables.nth(0).locator("tbody tr").all_inner_texts()
        assert len(rows) == 16 and rows[0].startswith("mel_distance")
        assert "too short: 0.100 s (needs 0.25 s)" in tables.nth(4).inner_text()
        images = page.locator("img")
        assert images.count() == 4  # 2 codebook-usage plots, 2 spectrogram sheets
        for i in range(images.count()):
            img = images.nth(i)
            assert img.evaluate("i => i.complete && i.naturalWidth > 100")
            assert img.evaluate(IMAGE_RANGE) > 100  # drawn, not blank
        durations = page.evaluate(DURATIONS)
        assert len(durations) == 8  # 2 examples x (original + 3 systems)
        for d, want in zip(durations, [2.5] * 4 + [1.6] * 4, strict=True):
            assert abs(d - want) < 0.002, durations
        if os.environ.get("AUDIOTOK_EVAL_SCREENSHOT"):
            page.screenshot(path=os.environ["AUDIOTOK_EVAL_SCREENSHOT"], full_page=True)
        browser.close()
    assert not errors, errors
