"""DAC.speech v1.0 (IBM's 24 kHz DAC with 2 codebooks, OuteTTS 1.0's codec) and OuteTTS 1.0's
pipeline (pipeline="outetts") against outetts 0.4.4's own DacInterface on random weights
(small, and the released size): codes equal through every branch (a clip shorter than the
loudness block, one 5 s window, three windows with a ragged last, a peak-limited input), each
item's codes (and audio) in a batch as alone, audio within 1e-4 through the 2048-frame decode
chunks; the title, licence and preset; what the pipeline refuses."""

import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from audiotok.export import export_onnx
from tests.bounds import AUDIO_PARITY
from tests.models.dac import outetts_reference, reference

RATE = 24000


def speechy(n: int, seed: int) -> torch.Tensor:
    return 0.2 * torch.randn(n, generator=torch.Generator().manual_seed(seed))


def clicky(n: int, seed: int) -> torch.Tensor:
    """Quiet noise with a loud click every 4000 samples: -18 LUFS puts its peak over -1 dBFS."""
    x = 0.01 * torch.randn(n, generator=torch.Generator().manual_seed(seed))
    x[::4000] = 0.9
    return x


@pytest.fixture(scope="module")
def small(dac_refs):
    r = dac_refs("speech_small")
    return r, outetts_reference.dac_interface(r.pth)


def test_the_outetts_pipeline_equals_outetts(small):
    r, iface = small
    codec, plain = audiotok.load(r.pth, pipeline="outetts"), audiotok.load(r.pth)
    assert codec.info()["pipeline"] == "outetts"
    items = [speechy(7000, 1), speechy(120_000, 2), speechy(11 * RATE + 77, 3),
             clicky(30_000, 4)]
    wants = []
    for x in items:
        with torch.no_grad():
            wants.append(iface.encode(x.view(1, 1, -1).clone())[0])
        assert torch.equal(codec.encode(x, RATE).tokens[0], wants[-1]), x.numel()
    batch = codec.encode(items, RATE)
    for i, want in enumerate(wants):
        assert torch.equal(batch.tokens[i, :, : batch.lengths[i]], want)
    together = codec.decode(batch)  # each item decoded, faded and normalised as alone
    for i, want in enumerate(wants):
        alone = codec.decode(want[None])[0, 0]
        n = min(alone.numel(), int(batch.num_samples[i]))
        torch.testing.assert_close(together[i, 0, :n], alone[:n], rtol=0, atol=1e-5)
    # the loudness and the windows are what OuteTTS's codes carry
    assert not torch.equal(plain.encode(items[2], RATE).tokens[0], wants[2])
    g = torch.Generator().manual_seed(5)
    for frames in (2100, 10):  # two decode chunks (2048 and 52); a clip under a loudness block
        codes = torch.randint(0, 1024, (1, 2, frames), generator=g)
        with torch.no_grad():
            want = iface.decode(codes.clone())
        got = codec.decode(codes)
        assert got.shape == want.shape, frames
        assert (got - want).abs().max() <= AUDIO_PARITY, frames
    silent = torch.zeros(RATE)  # no loudness to normalise: kept silent (the reference: NaN)
    assert torch.equal(codec.encode(silent, RATE).tokens, plain.encode(silent, RATE).tokens)


def test_the_released_size_its_title_and_licence(dac_refs):
    r = dac_refs("speech")
    codec = audiotok.load(r.pth)
    assert codec.title == "DAC.speech v1.0"
    assert codec.licence.startswith("CDLA-Permissive-2.0")
    info = codec.info()
    assert (info["num_codebooks"], info["bitrate_bps"], info["frame_rate"]) == (2, 1500.0, 75.0)
    x = speechy(RATE + 77, 6)
    want = reference.reference_codes(r.ref, x[None, None])
    assert torch.equal(codec.encode(x, RATE).tokens, want)
    iface = outetts_reference.dac_interface(r.pth)
    pipeline = audiotok.load(r.pth, pipeline="outetts")
    with torch.no_grad():
        codes = iface.encode(x.view(1, 1, -1).clone())
        want = iface.decode(codes.clone())
    assert torch.equal(pipeline.encode(x, RATE).tokens, codes)
    got = pipeline.decode(codes)
    assert got.shape == want.shape and (got - want).abs().max() <= AUDIO_PARITY


def test_what_the_pipeline_refuses(small, dac_refs, tmp_path):
    r, _ = small
    codec = audiotok.load(r.pth, pipeline="outetts")
    with pytest.raises(AudiotokError, match="does not stream"):
        codec.stream_decoder()
    with pytest.raises(AudiotokError, match="without pipeline='outetts'"):
        export_onnx(codec, tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()
    with pytest.raises(AudiotokError, match="pipeline must be one of plain, outetts"):
        audiotok.load(r.pth, pipeline="fast")
    with pytest.raises(AudiotokError, match="24 kHz"):
        audiotok.load(dac_refs("tiny").pth, pipeline="outetts")
    plain = audiotok.load(r.pth)  # DAC.speech itself streams as DAC does
    codes = torch.randint(0, 1024, (1, 2, 40), generator=torch.Generator().manual_seed(7))
    with plain.stream_decoder() as dec:
        streamed = torch.cat([dec.push(codes[..., i: i + 7]) for i in range(0, 40, 7)]
                             + [dec.flush()], -1)
    assert (streamed - plain.decode(codes)).abs().max() <= 1e-5


def test_the_preset_through_a_hub_cache(small, tmp_path):
    """`dac-speech` fetches ibm-research/DAC.speech.v1.0's weights file (here from a local cache
    laid out as the hub's, offline); its options apply."""
    from tests.test_hub import _run, cache_repo

    r, _ = small
    cache_repo(tmp_path / "cache", "ibm-research/DAC.speech.v1.0",
               {"weights_24khz_1.5kbps_v1.0.pth": r.pth})
    out = _run("import audiotok\nc = audiotok.load('dac-speech', pipeline='outetts')\n"
               "print(c.num_codebooks, c.sample_rate, c.info()['pipeline'])\n",
               {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "h")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["2", "24000", "outetts"]
