"""The demo page with EnCodec 48 kHz (stereo, 1 s segments each with a scale), in a real
browser (headless Chromium, driven by Playwright): a stereo upload reconstructs in one request
(the scales go back with the tokens) and streamed (the scales as their own message, the audio
interleaved and played on two channels), stereo out. The Python stream client, against the
same server process, encodes and decodes stereo with the scales exactly as the library does."""

import numpy as np
import pytest

from tests.bounds import SAME_MODEL
from tests.server.test_page import (  # noqa: F401
    BLANK,
    NEEDS_CHROMIUM,
    page,
    run,
    run_streamed,
    serving,
    speech_clip,
)


@pytest.fixture(scope="module")
def server(enc48_ref):
    yield from serving(model=f"encodec48={enc48_ref.th}")


@NEEDS_CHROMIUM
def test_stereo_reconstructs_whole_and_streamed(page, tmp_path):  # noqa: F811
    import soundfile as sf

    mono, rate = sf.read(speech_clip(tmp_path, 2.5), dtype="float32")
    upload = tmp_path / "stereo.wav"  # the speech on the left, quieter and delayed on the right
    sf.write(upload, np.stack([mono, 0.5 * np.roll(mono, rate // 10)], 1), rate)
    option = page.locator("#model option[value='encodec48']")
    assert "(Meta EnCodec, 48000 Hz stereo, 16 codebooks)" in option.inner_text()
    page.select_option("#model", "encodec48")
    page.set_input_files("#file", str(upload))
    assert run(page) == "done", page.inner_text("#error")
    result = page.evaluate("window.audiotokResult")
    # 2.5 s at 48 kHz: segments at 0, 47520 and 95040 samples, of 150, 150 and 78 frames
    assert result["channels"] == 2 and result["frames"] == 150 + 150 + 78
    assert abs(result["outputSeconds"] - result["inputSeconds"]) < 1e-3
    for canvas in ("spec-orig", "spec-rec", "tokens"):
        assert page.evaluate(BLANK, canvas) > 50, f"{canvas} is blank"
    run_streamed(page)
    result = page.evaluate("window.audiotokResult")
    assert result["channels"] == 2 and "at 48000 Hz, 2 channels" in page.inner_text("#f-output")
    page.screenshot(path=str(tmp_path / "encodec48_page.png"), full_page=True)


def test_the_stream_client_with_stereo_and_scales(server, enc48_ref):
    import dataclasses

    import torch

    import audiotok
    from audiotok.server.client import EncodeStreamClient, stream_decode

    codec = audiotok.load(enc48_ref.th)
    x = (0.2 * np.random.default_rng(9).standard_normal((2, 50000))).astype(np.float32)
    codes = codec.encode(torch.from_numpy(x), 48000)
    want = codec.decode(dataclasses.replace(codes, num_samples=None))[0].numpy()
    url = f"ws://{server}"
    with EncodeStreamClient(url, "encodec48") as s:
        for a in range(0, x.shape[1], 7000):
            s.send(x[:, a : a + 7000])
        s.end()
        tokens = []
        while (t := s.recv(timeout=60)) is not None:
            tokens.append(t)
    np.testing.assert_array_equal(np.concatenate(tokens, 1), codes.tokens[0].numpy())
    assert s.scales == codes.scales[0].tolist()
    audio, summary, _ = stream_decode(url, codes.tokens[0].numpy(), "encodec48",
                                      push_frames=25, scales=s.scales)
    assert audio.shape == want.shape == (2, 47520 + 8 * 320)  # segments of 150 and 8 frames
    assert np.abs(audio - want).max() <= SAME_MODEL and summary["frames"] == codes.tokens.shape[-1]
