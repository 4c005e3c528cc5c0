"""NanoCodec streamed and served: the decoder is causal, so a decode stream (every layer keeping
its state, each frame decoded once) equals the offline decode for any pushes; the engine's
streams under random schedules, HTTP encode and decode and the WebSocket decode stream equal the
library."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

from audiotok.server import Engine, EngineSettings
from tests.bounds import SAME_MODEL
from tests.server.schedules import run_decode_schedule
from tests.server.test_engine import CORNERS, schedules

pytest.importorskip("fastapi")
from tests.helpers import check_served  # noqa: E402


@pytest.mark.parametrize("name", ["tiny", "tiny_189"])
def test_stream_decoder_equals_offline(nano, name):
    codec = nano(name).codec
    size, groups, spf = codec.codebook_sizes[0], codec.num_codebooks, codec.samples_per_frame
    tokens = torch.randint(0, size, (2, groups, 29), generator=torch.Generator().manual_seed(1))
    whole = codec.decode(tokens)
    for sizes in ([1] * 29, [5, 1, 13, 10], [29]):
        pieces, sent = [], 0
        with codec.stream_decoder(2) as dec:
            for n in sizes:
                piece = dec.push(tokens[..., sent : sent + n])
                sent += n
                assert piece.shape[-1] == n * spf  # (causal: every frame's audio at once)
                pieces.append(piece)
            pieces.append(dec.flush())
        got = torch.cat(pieces, -1)
        assert got.shape == whole.shape and (got - whole).abs().max() <= SAME_MODEL


@settings(max_examples=4, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
def test_engine_decode_streams_equal_offline(nano, plan):
    codec = nano("tiny").codec
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"nano": codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    run_decode_schedule(engine, codec, streams, seed, name="nano")


def test_http_and_websocket_equal_the_library(nano):
    codec = nano("tiny").codec
    audio = 0.1 * np.random.default_rng(3).standard_normal(9000)
    tokens = np.random.default_rng(4).integers(0, 4032, (4, 23))
    check_served(codec, "nano", audio, tokens, decode="exact")
