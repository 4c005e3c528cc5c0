"""DAC streams: the stateful stream (every frame decoded once, nn/stream_steps.py) and windows
of 10 frames' context each side equal the offline decode, every sample once, the T * 320 - 8
end of the odd stride included; shorter windows deviate; the engine's stateful and windowed
streams under random schedules equal their offline decodes."""

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

import audiotok
from audiotok.server import Engine, EngineSettings
from audiotok.server.settings import WindowSettings
from tests.bounds import SAME_MODEL
from tests.helpers import stream_decoded
from tests.server.schedules import run_decode_schedule
from tests.server.test_engine import CORNERS, schedules


@pytest.fixture(scope="module")
def dac_codecs(dac_refs):
    return {name: audiotok.load(dac_refs(name).pth) for name in ("tiny", "tiny_odd")}


def tokens_for(codec, frames: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1024, (2, codec.num_codebooks, frames), generator=g)


def streamed(codec, tokens, sizes, window=None) -> torch.Tensor:
    return stream_decoded(codec, tokens, sizes, window=window)


@pytest.mark.parametrize("name", ["tiny", "tiny_odd"])
def test_stream_decoder_equals_offline(dac_codecs, dac_refs, name):
    frames = 37
    # all codebooks, and a leading few (a codec loaded with codebooks=3 streams 3 rows)
    for codec in (dac_codecs[name], audiotok.load(dac_refs(name).pth, codebooks=3)):
        tokens = tokens_for(codec, frames, 1)
        whole = codec.decode(tokens)
        assert whole.shape[-1] == codec.config.decoded_samples(frames)
        for window in (None, (10, 10)):
            for sizes in ([1] * frames, [5, 1, 13, 18]):
                got = streamed(codec, tokens, sizes, window)
                assert got.shape == whole.shape, (name, window, sizes)
                assert (got - whole).abs().max() <= SAME_MODEL, (name, window, sizes)


def test_stateful_latency_and_shorter_windows(dac_codecs):
    """The stateful stream puts a sample out once the decoder's reach has come (measured
    here: never more than 10 frames behind); windows with less context come sooner and
    deviate; a window must reach a frame past what it keeps at 16/24 kHz."""
    codec = dac_codecs["tiny"]
    tokens = tokens_for(codec, 30, 2)
    whole = codec.decode(tokens)
    spf = codec.samples_per_frame
    with codec.stream_decoder(2) as dec:
        done = 0
        for f in range(30):
            done += dec.push(tokens[..., f : f + 1]).shape[-1]
            assert done >= (f + 1 - 10) * spf
    short = streamed(codec, tokens, [1] * 30, window=(2, 2))
    assert short.shape == whole.shape and (short - whole).abs().max() > 1e-4
    with pytest.raises(ValueError, match="lookahead of at least 1"):
        dac_codecs["tiny_odd"].stream_decoder(window=(10, 0))


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
@pytest.mark.parametrize("name, windowed", [("tiny", False), ("tiny_odd", False),
                                            ("tiny_odd", True)])
def test_engine_decode_streams_equal_offline(dac_codecs, name, windowed, plan):
    codec = dac_codecs[name]
    streams, max_batch, max_step_frames, seed = plan
    own = codec.streaming.window
    window = WindowSettings(own.left, own.chunk, own.lookahead) if windowed else None
    engine = Engine({"dac": codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames, window=window),
        start=False)
    assert engine.models["dac"].runners["decode"].mode == ("windowed" if windowed
                                                           else "stateful")
    run_decode_schedule(engine, codec, streams, seed, name="dac")
    with pytest.raises(ValueError, match="lookahead of at least 1"):
        Engine({"dac": dac_codecs["tiny_odd"]}, EngineSettings(window=WindowSettings(4, 4, 0)),
               start=False)
