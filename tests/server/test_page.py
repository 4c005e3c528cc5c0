"""The demo page in a real browser (headless Chromium, driven by Playwright): upload the shipped
speech sample and reconstruct it in one request, its first 2.5 s streamed (at real-time pace),
and upload a broken file.

Set AUDIOTOK_SCREENSHOT=PATH to also save the finished page there (the README's picture)."""

import os
import shutil
import signal

import pytest

pytest.importorskip("fastapi")
sync_api = pytest.importorskip("playwright.sync_api")
from tests.pipeline.conftest import SPEECH  # noqa: E402
from tests.server.conftest import start_server  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEEDS_CHROMIUM = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install "
                                                             "chromium)")
pytestmark = NEEDS_CHROMIUM

BLANK = """(id) => {
  const c = document.getElementById(id), d = c.getContext('2d').getImageData(0, 0, c.width,
    c.height).data;
  let lo = 255, hi = 0;
  for (let i = 0; i < d.length; i += 4) { lo = Math.min(lo, d[i]); hi = Math.max(hi, d[i]); }
  return hi - lo;
}"""


def serving(*args: str, **kw):
    """`audiotok serve` (start_server's arguments) for a module's `server` fixture: its address,
    then SIGTERM and the exit. Without the warm-up (tests/server/test_serve.py tests it): it
    would run every step shape in the background while the page's tests run."""
    p, base, _ = start_server("--step-wait-ms", "5", "--no-warmup", *args, **kw)
    yield base
    os.kill(p.pid, signal.SIGTERM)
    p.wait(timeout=60)


@pytest.fixture(scope="module")
def server():
    yield from serving()


@pytest.fixture(scope="module")
def page(server):
    yield from open_page(server)


def open_page(server):
    """The page of the server at `server` in headless Chromium, once idle (for a module's `page`
    fixture); no page errors by the end."""
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--autoplay-policy=no-user-gesture-required",
            "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"])
        page = browser.new_page(viewport={"width": 1040, "height": 860})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"http://{server}/")
        page.wait_for_function("document.body.dataset.state === 'idle'", timeout=30_000)
        yield page
        browser.close()
        assert not errors, errors


def run(page, timeout=120_000):
    page.click("#go")
    page.wait_for_function("['done', 'error'].includes(document.body.dataset.state)",
                           timeout=timeout)
    return page.evaluate("document.body.dataset.state")


def test_reconstruct_shows_audio_pictures_and_numbers(page, tmp_path):
    assert page.locator("#model option").first.inner_text().startswith("s2_tiny (")
    page.set_input_files("#file", str(SPEECH))
    assert run(page) == "done", page.inner_text("#error")
    result = page.evaluate("window.audiotokResult")
    assert abs(result["outputSeconds"] - result["inputSeconds"]) <= result["frameSeconds"]
    assert result["frames"] == 225
    for canvas in ("spec-orig", "spec-rec", "tokens"):
        assert page.evaluate(BLANK, canvas) > 50, f"{canvas} is blank"
    assert "225 frames x 10 codebooks" in page.inner_text("#f-tokens")
    assert page.inner_text("#f-bitrate") == "1.34 kbit/s"
    for cell in ("#f-input", "#f-encode", "#f-decode", "#f-rtf", "#f-output"):
        assert any(ch.isdigit() for ch in page.inner_text(cell)), cell
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def speech_clip(folder, seconds: float):
    """The first `seconds` of the speech sample, as a WAV file in `folder` (a streamed run plays
    at real-time pace, so a short file keeps a test short)."""
    import soundfile as sf

    audio, rate = sf.read(SPEECH, dtype="float32")
    path = folder / f"speech_{seconds:g}s.wav"
    sf.write(path, audio[: int(seconds * rate)], rate)
    return path


def run_streamed(page, upload=None) -> None:
    """Reconstruct the uploaded file (or `upload`) streamed; check the page reports first
    audio."""
    if upload is not None:
        page.set_input_files("#file", str(upload))
    page.check("#stream")
    try:
        assert run(page) == "done", page.inner_text("#error")
    finally:
        page.uncheck("#stream")
    result = page.evaluate("window.audiotokResult")
    assert 0 < result["ttfa"] < 5 and result["underruns"] is not None
    assert abs(result["outputSeconds"] - result["inputSeconds"]) <= result["frameSeconds"]
    assert "first audio after" in page.inner_text("#f-stream")


def test_streamed_reconstruction_reports_first_audio(page, tmp_path):
    run_streamed(page, speech_clip(tmp_path, 2.5))
    if os.environ.get("AUDIOTOK_SCREENSHOT"):
        page.screenshot(path=os.environ["AUDIOTOK_SCREENSHOT"], full_page=True)


def test_a_bad_upload_shows_the_error(page, tmp_path):
    bad = tmp_path / "broken.wav"
    bad.write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot audio at all")
    page.set_input_files("#file", str(bad))
    assert run(page) == "error"
    text = page.inner_text("#error")
    assert text.startswith("400: ") and "cannot read audio" in text, text


def test_recording_is_sent_as_wav(page):
    """Chromium's fake microphone (a tone): recorded as PCM, sent as WAV, reconstructed."""
    page.click("#record")
    page.wait_for_function("document.getElementById('status').textContent === 'recording…'")
    page.wait_for_timeout(1500)
    page.click("#record")
    page.wait_for_function("document.getElementById('status').textContent.startsWith("
                           "'recorded')")
    assert run(page) == "done", page.inner_text("#error")
    result = page.evaluate("window.audiotokResult")
    assert 1.0 < result["inputSeconds"] < 3.0
    assert abs(result["outputSeconds"] - result["inputSeconds"]) <= result["frameSeconds"]
