"""EnCodec 32 kHz (MusicGen's codec, facebook/encodec_32khz): codes identical to the `encodec`
package's modules and to transformers' EncodecModel with the hub config, audio within AUDIO_PARITY,
for lengths 1, hop - 1, hop, hop + 1, 3 hop + 7 and 1 s, from either layout (the package's
names are told from the 24 kHz model's by their shapes); a padded batch equal to its items
alone; the stateful decoder stream (not causal: reflection at both ends of every layer) equal to
the offline decode, in the library and the engine; the hub name."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

import audiotok
from audiotok.errors import AudiotokError
from audiotok.models.encodec.config import ENCODEC_32KHZ, EncodecConfig
from audiotok.server import Engine, EngineSettings
from tests.bounds import AUDIO_PARITY, ROUNDING
from tests.models.encodec import reference
from tests.models.encodec.test_streaming import check_streams
from tests.server.schedules import run_decode_schedule
from tests.server.test_engine import CORNERS, schedules

HOP = 640
LENGTHS = (1, HOP - 1, HOP, HOP + 1, 3 * HOP + 7, 32000)


def noise(n: int, seed: int) -> torch.Tensor:
    return 0.2 * torch.randn(1, 1, n, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("layout", ["th", "hf_dir"])
def test_codes_and_audio_equal_both_references(enc32_ref, layout):
    codec = audiotok.load(getattr(enc32_ref, layout))
    assert codec.config == ENCODEC_32KHZ
    assert (codec.num_codebooks, codec.codebook_sizes, codec.samples_per_frame) == \
        (4, (2048,) * 4, HOP)
    assert codec.bandwidth == pytest.approx(2.2)
    for i, n in enumerate(LENGTHS):
        x = noise(n, i)
        want = reference.reference_codes(enc32_ref.ref, x)
        codes = codec.encode(x[0], 32000)
        assert torch.equal(codes.tokens, want), (layout, n)
        assert codes.tokens.shape[-1] == -(-n // HOP)
        with torch.no_grad():
            hf = enc32_ref.hf.encode(x)  # (transformers' default bandwidth: all 4 codebooks)
            hf_audio = enc32_ref.hf.decode(hf.audio_codes, hf.audio_scales).audio_values
        assert torch.equal(hf.audio_codes[0], want)
        audio = codec.decode(codes)
        ref_audio = reference.reference_decode(enc32_ref.ref, want)[..., :n]
        assert audio.shape == ref_audio.shape == hf_audio[..., :n].shape
        assert (audio - ref_audio).abs().max() <= AUDIO_PARITY
        assert (audio - hf_audio[..., :n]).abs().max() <= AUDIO_PARITY
    assert len(torch.unique(want)) > 60  # of 200 codes: not degenerate


def test_long_audio_encodes_in_overlapping_windows(enc32_ref, monkeypatch):
    """Audio of two windows or more (2 s each) runs the convolutions window by window, each
    widened by their reach and its edge frames dropped, then the LSTM on the whole: the
    package's codes, in a batch of two lengths too, the one pass's latents (within ROUNDING)
    and the one-pass codes."""
    from audiotok.nn import seanet

    codec = audiotok.load(enc32_ref.th)
    assert codec.encode_piece_seconds == 2.0
    used = []
    real = seanet.latents_in_windows
    monkeypatch.setattr(seanet, "latents_in_windows",
                        lambda *a: used.append(a[1].shape[-1]) or real(*a))
    items = [noise(n, 40 + i)[0] for i, n in enumerate((128000 + 77, 248843))]
    codes = codec.encode(items, 32000)
    assert used == [128077, 248843]
    for i, item in enumerate(items):
        want = reference.reference_codes(enc32_ref.ref, item[None])
        assert torch.equal(codes.tokens[i : i + 1, :, : codes.lengths[i]], want), i
    with torch.inference_mode():
        for n in (128077, 106231):  # (the second: windows of 1 s)
            x = noise(n, 7)
            got = real(codec.model.encoder, x, 64000 if n > 120000 else 32000)
            assert (got - codec.model.encoder(x)).abs().max() <= ROUNDING, n
    codec.encode_piece_seconds = None  # one pass
    assert torch.equal(codec.encode(items, 32000).tokens, codes.tokens)
    assert len(used) == 2


def test_musicgen_ids_of_the_codecs_tokens(enc32_ref):
    """MusicGen's delayed decoder sequence of this codec's codes (2048 in range: the pad and
    start id is 2048), and back."""
    from audiotok.export.llm import scheme_for

    codec = audiotok.load(enc32_ref.th)
    tokens = codec.encode(noise(5000, 12)[0], 32000).tokens[0].numpy()
    scheme = scheme_for("musicgen", codec.codebook_sizes)
    ids = scheme.to_ids(tokens)
    assert ids.shape == (4, tokens.shape[1] + 4) and ids[3, :4].tolist() == [2048] * 4
    assert np.array_equal(scheme.from_ids(ids), tokens)


def test_a_padded_batch_equals_its_items_alone(enc32_ref):
    codec = audiotok.load(enc32_ref.th)
    items = [noise(n, 30 + i)[0, 0] for i, n in enumerate((5000, 5000, 2345))]
    batch = codec.encode(items, 32000)
    audio = codec.decode(batch)
    for i, item in enumerate(items):
        want = reference.reference_codes(enc32_ref.ref, item[None, None])
        t = int(batch.lengths[i])
        assert torch.equal(batch.tokens[i : i + 1, :, :t], want)
        one = codec.decode(codec.encode(item, 32000))
        assert (audio[i, :, : one.shape[-1]] - one[0]).abs().max() <= ROUNDING


def test_stream_decoder_equals_offline(enc32_ref):
    """Every layer reflects at both ends, so the audio lags the codes (2402 samples, 75 ms)
    and the stream's end supplies the rest; the stream equals the offline decode."""
    codec = audiotok.load(enc32_ref.hf_dir)
    check_streams(codec, ((1, [[1]]), (3, [[1, 1, 1]]), (5, [[1] * 5, [5]]),
                          (30, [[1] * 30, [3, 9, 1, 17]])), seed=3)
    tokens = torch.randint(0, 2048, (1, 4, 8), generator=torch.Generator().manual_seed(4))
    with codec.stream_decoder() as dec:
        out = [dec.push(tokens[:1, :, t : t + 1]).shape[-1] for t in range(8)]
    assert out == [0, 0, 0, 158, 640, 640, 640, 640]  # 4 x 640 - 158 = 2402 samples behind
    with pytest.raises(AudiotokError, match="no exact stream encoder"):
        codec.stream_encoder()


def test_detection_options_and_the_hub_name(enc32_ref, tmp_path):
    from audiotok.models import detect_family
    from tests.test_hub import load_through_cache

    assert detect_family(enc32_ref.th).name == "encodec"
    with pytest.raises(AudiotokError, match=r"bandwidth must be one of \[2.2\]"):
        audiotok.load(enc32_ref.th, bandwidth="6")
    assert audiotok.load(enc32_ref.th, bandwidth="2.2").num_codebooks == 4
    x = noise(3000, 9)
    stderr, codes = load_through_cache(tmp_path, "facebook/encodec_32khz", enc32_ref.hf_dir,
                                       "encodec-32khz", x[0, 0].numpy(), 32000,
                                       options=", codebooks=2")
    assert "licence not stated" in stderr
    want = reference.reference_codes(enc32_ref.ref, x)[:, :2]
    assert np.array_equal(codes, want.numpy())


SMALL = EncodecConfig(sample_rate=32000, n_filters=4, dimension=16, bins=64, lstm=1,
                      ratios=(8, 5, 4, 4), causal=False, true_skip=True,
                      target_bandwidths=(0.6, 1.2))  # 2 codebooks of 64


@pytest.fixture(scope="module")
def small_codec():
    return reference.small_codec(SMALL)


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
def test_engine_decode_streams_equal_offline(small_codec, plan):
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"encodec": small_codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    assert engine.models["encodec"].runners["decode"].mode == "stateful"
    assert "encode" not in engine.models["encodec"].runners
    run_decode_schedule(engine, small_codec, streams, seed, name="encodec")
