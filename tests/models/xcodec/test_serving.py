"""The Higgs Audio v2 tokenizer streamed and served: the decoder reaches under 10 frames each
side, so the library's stateful stream (every frame decoded once) and windows of 10 frames'
context each side equal the offline decode for any pushes; shorter windows deviate; the engine's
streams under random schedules, HTTP encode and decode and the WebSocket decode stream equal the
library."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

from audiotok.server import Engine, EngineSettings
from audiotok.server.settings import WindowSettings
from tests.bounds import SAME_MODEL
from tests.server.schedules import run_decode_schedule
from tests.server.test_engine import CORNERS, schedules

pytest.importorskip("fastapi")
from tests.helpers import check_served, stream_decoded  # noqa: E402


def streamed(codec, tokens, sizes, window=None) -> torch.Tensor:
    return stream_decoded(codec, tokens, sizes, window=window)


def test_stream_decoder_equals_offline(higgs):
    codec = higgs("tiny").codec
    tokens = torch.randint(0, 1024, (2, 8, 31), generator=torch.Generator().manual_seed(1))
    whole = codec.decode(tokens)
    assert whole.shape == (2, 1, 31 * 960)
    for window in (None, (10, 10)):
        for sizes in ([1] * 31, [5, 1, 13, 12]):
            got = streamed(codec, tokens, sizes, window)
            assert got.shape == whole.shape and (got - whole).abs().max() <= SAME_MODEL
    with codec.stream_decoder(2) as dec:  # out once its reach (under 10 frames) has come
        done = 0
        for f in range(31):
            done += dec.push(tokens[..., f : f + 1]).shape[-1]
            assert done >= (f + 1 - 10) * 960
    short = streamed(codec, tokens, [1] * 31, window=(2, 2))
    assert short.shape == whole.shape and (short - whole).abs().max() > 1e-4


@settings(max_examples=4, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
@pytest.mark.parametrize("windowed", [False, True])
def test_engine_decode_streams_equal_offline(higgs, windowed, plan):
    codec = higgs("tiny").codec
    streams, max_batch, max_step_frames, seed = plan
    own = codec.streaming.window
    window = WindowSettings(own.left, own.chunk, own.lookahead) if windowed else None
    engine = Engine({"higgs": codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames, window=window),
        start=False)
    assert engine.models["higgs"].runners["decode"].mode == ("windowed" if windowed
                                                             else "stateful")
    run_decode_schedule(engine, codec, streams, seed, name="higgs")


def test_http_and_websocket_equal_the_library(higgs):
    codec = higgs("tiny").codec
    audio = 0.1 * np.random.default_rng(3).standard_normal(24500)
    tokens = np.random.default_rng(4).integers(0, 1024, (8, 23))
    check_served(codec, "higgs", audio, tokens, decode="stateful")
