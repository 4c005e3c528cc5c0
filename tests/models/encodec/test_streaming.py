"""EnCodec 24 kHz streams: the stateful decoder stream (reflection at the start, each layer's
context, the LSTM state, the transposed convolutions' frames) equals the offline decode for any
pushes and lengths, short ones included, with the first audio once 7 frames are in; the stateful
encoder stream (the same, plus the strided convolutions' remainders and the end's reflection)
equals the offline encode and the encodec package, the first tokens once 7 frames of audio are
in; the engine's decode and encode streams under random schedules equal their offline results."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

import audiotok
from audiotok.models.encodec.config import EncodecConfig
from audiotok.server import Engine, EngineSettings
from tests.bounds import SAME_MODEL
from tests.models.encodec import reference
from tests.server.schedules import run_decode_schedule, run_encode_streams
from tests.server.test_engine import CORNERS, schedules

SMALL = EncodecConfig(n_filters=4, dimension=16, bins=64, lstm=1,
                      target_bandwidths=(0.75, 1.5))  # 2 codebooks of 64


@pytest.fixture(scope="module")
def small_codec():
    codec = reference.small_codec(SMALL)
    assert codec.codebook_sizes == (64, 64)
    return codec


def streamed(codec, tokens, sizes):
    pieces, sent, first = [], 0, None
    with codec.stream_decoder(tokens.shape[0]) as dec:
        for n in sizes:
            pieces.append(dec.push(tokens[..., sent : sent + n]))
            sent += n
            if first is None and pieces[-1].shape[-1]:
                first = sent
        pieces.append(dec.flush())
    assert sent == tokens.shape[-1]
    return torch.cat(pieces, -1), first


def check_streams(codec, cases, seed: int) -> dict:
    """Random tokens of each case's frames streamed in each of its push plans (2 rows) equal
    the offline decode; the frames in when each plan's first audio came."""
    g = torch.Generator().manual_seed(seed)
    firsts = {}
    for frames, plans in cases:
        tokens = torch.randint(0, codec.codebook_sizes[0], (2, codec.num_codebooks, frames),
                               generator=g)
        whole = codec.decode(tokens)
        for sizes in plans:
            got, firsts[frames, tuple(sizes)] = streamed(codec, tokens, sizes)
            assert got.shape == whole.shape, (frames, sizes)
            assert (got - whole).abs().max() <= SAME_MODEL, (frames, sizes)
    return firsts


def test_stream_decoder_equals_offline(enc_ref):
    codec = audiotok.load(enc_ref.th, bandwidth="6")
    firsts = check_streams(codec, ((1, [[1]]), (6, [[1] * 6, [4, 2]]), (7, [[1] * 7, [7]]),
                                   (40, [[1] * 40, [2, 5, 1, 32], [40]])), seed=1)
    # the first convolution's reflection needs 7 frames
    assert [f for (frames, sizes), f in firsts.items() if frames >= 7 and sizes[0] == 1] == \
        [7, 7]


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
def test_engine_decode_streams_equal_offline(small_codec, plan):
    """Stateful streams in the engine (several as one batch once their states match), ragged
    pushes, streams opening at random steps; each equals its offline decode."""
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"encodec": small_codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    assert engine.models["encodec"].runners["decode"].mode == "stateful"
    run_decode_schedule(engine, small_codec, streams, seed, name="encodec")


def encoded(codec, audio, sizes):
    """Tokens of audio [B, n] pushed in pieces of `sizes` (cycled), and the samples pushed
    when the first tokens came."""
    pieces, sent, first = [], 0, None
    with codec.stream_encoder(audio.shape[0]) as enc:
        for i in range(audio.shape[-1]):
            if sent >= audio.shape[-1]:
                break
            n = sizes[i % len(sizes)]
            pieces.append(enc.push(audio[:, sent : sent + n]))
            sent += n
            if first is None and pieces[-1].shape[-1]:
                first = min(sent, audio.shape[-1])
        pieces.append(enc.flush())
    return torch.cat(pieces, -1), first


def test_stream_encoder_equals_offline_and_the_package(enc_ref):
    """Lengths around the start (7 frames: 2240 samples) and partial last frames; pushes of
    1 sample to thousands; the package's codes for some."""
    codec = audiotok.load(enc_ref.th, bandwidth="6")
    g = torch.Generator().manual_seed(2)
    for n in (1, 5, 7, 319, 320, 321, 2239, 2240, 2241, 3201, 24007):
        audio = 0.2 * torch.randn(2, n, generator=g)
        want = codec.encode(list(audio), 24000).tokens
        plans = [[320], [1000, 1, 77, 3000]] + ([[1] * 3 + [13]] if n < 3300 else [])
        for sizes in plans:
            got, first = encoded(codec, audio, sizes)
            assert torch.equal(got, want), (n, sizes)
            if sizes == [320] and n >= 2240:
                assert first == 2240  # the last convolution's reflection needs 7 frames
        if n in (321, 3201, 24007):
            assert torch.equal(want[:1], reference.reference_codes(enc_ref.ref, audio[:1, None],
                                                                   6.0))


def test_a_long_stream_encoded_frame_by_frame_equals_offline(enc_ref):
    codec = audiotok.load(enc_ref.hf_dir, bandwidth="6")
    audio = 0.2 * torch.randn(1, 5 * 24000 + 123, generator=torch.Generator().manual_seed(5))
    got, _ = encoded(codec, audio, [320])
    assert torch.equal(got, codec.encode(audio[0], 24000).tokens)


@pytest.mark.parametrize("max_batch,max_step_frames", [(1, 1), (16, 8), (4, 3)])
def test_engine_encode_streams_equal_offline(small_codec, max_batch, max_step_frames,
                                             monkeypatch):
    """Streams of 1 sample to 3 s pushed in ragged pieces; batched when their states match."""
    from audiotok.nn.stream_steps import EncoderStream

    engine = Engine({"encodec": small_codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    assert engine.models["encodec"].runners["encode"].mode == "stateful"
    rows = []
    real = EncoderStream.push_together

    def counted(streams, audio):
        rows.append(len(streams))
        return real(streams, audio)

    monkeypatch.setattr(EncoderStream, "push_together", staticmethod(counted))
    rng = np.random.default_rng(max_batch)
    lengths = [1, 300, 2240, 2241, 9000, 30000, 72000, 30000, 30000]
    audio = [(0.2 * rng.standard_normal(n)).astype(np.float32) for n in lengths]
    run_encode_streams(engine, small_codec, audio, rng, name="encodec", push_chance=0.8)
    assert max(rows) == 1 if max_batch == 1 else max(rows) > 1
