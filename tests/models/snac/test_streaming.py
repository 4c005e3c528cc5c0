"""SNAC streams: windows with the context the decoder's layers reach (3 coarse frames each side
at 24 kHz, 8 aligned to the attention windows at 32 kHz) equal the offline decode, seeded noise
included, in the library's stream_decoder and in the serving engine under random schedules;
every sample comes out once, the first frame and the last ones included."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

from audiotok.models.snac.config import SNAC_24KHZ, SNAC_32KHZ, decode_context
from audiotok.server import Engine, EngineSettings
from audiotok.server.settings import WindowSettings
from tests.bounds import ROUNDING, SAME_MODEL
from tests.server.schedules import run_decode_schedule
from tests.server.test_engine import CORNERS, schedules


def test_decode_context_follows_the_layers():
    # the spec's measured receptive fields: 24 kHz 4757 samples (3 frames) each side; 32 kHz
    # 8 frames aligned to the 4-frame attention windows
    assert decode_context(SNAC_24KHZ) == (3, 3)
    assert decode_context(SNAC_32KHZ) == (8, 8)


@pytest.mark.parametrize("name", ["tiny", "tiny_blocks", "24khz", "32khz"])
def test_stream_decoder_equals_offline(snac_codecs, name):
    """The stateful stream (default) and the windowed one (window=, the engine's way): every
    sample once, equal to the offline decode; the stateful one puts out each sample as soon as
    the decoder's reach (4757 samples at 24 kHz) has come."""
    codec = snac_codecs[name]
    frames = 23  # at 32 kHz not whole attention windows: the last one padded alike
    g = torch.Generator().manual_seed(4)
    batch = 1 if name == "32khz" else 2  # (the full 32 kHz model is the slow one)
    tokens = torch.randint(0, 4096 if "khz" in name else 64,
                           (batch, codec.num_codebooks, frames), generator=g)
    whole = codec.decode(tokens)
    spf = codec.samples_per_frame
    assert whole.shape[-1] == frames * spf
    plans = [[1] * frames, [5, 1, 7, 10]] if "khz" not in name else [[1] * frames, [frames]]
    own = codec.streaming.window
    left, lookahead = own.left, own.lookahead
    for window in (None, (left, lookahead)):
        for sizes in plans:
            pieces, sent = [], 0
            with codec.stream_decoder(batch, window=window) as dec:
                for n in sizes:
                    pieces.append(dec.push(tokens[..., sent : sent + n]))
                    sent += n
                    done = sum(p.shape[-1] for p in pieces)
                    if window is not None:  # a frame's audio once `lookahead` frames follow
                        assert done >= (sent - lookahead - own.align + 1) * spf
                    elif name == "24khz":  # a sample once the decoder's reach has come
                        assert done == max(0, sent * spf - 4757)
                pieces.append(dec.flush())
            got = torch.cat(pieces, -1)
            assert got.shape == whole.shape
            assert (got - whole).abs().max() <= SAME_MODEL, (name, window, sizes)


@settings(max_examples=6, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
@pytest.mark.parametrize("name, windowed", [("tiny", False), ("tiny_blocks", False),
                                            ("tiny_blocks", True)])
def test_engine_decode_streams_equal_offline(snac_codecs, name, windowed, plan):
    """The engine's SNAC decode streams (several in one batch, ragged pushes): stateful (the
    default: streams whose states match run as one batch, the ends on their own), or windowed
    (--window; the window's place in its stream passed to the seeded noise); each equals its
    offline decode."""
    codec = snac_codecs[name]
    streams, max_batch, max_step_frames, seed = plan
    own = codec.streaming.window
    window = WindowSettings(own.left, own.chunk, own.lookahead) if windowed else None
    engine = Engine({"snac": codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames, window=window),
        start=False)
    assert engine.models["snac"].runners["decode"].mode == ("windowed" if windowed
                                                            else "stateful")
    run_decode_schedule(engine, codec, streams, seed, name="snac")


def test_offline_partial_attention_window_is_edge_padded(snac_codecs):
    codec = snac_codecs["32khz"]
    tokens = torch.randint(0, 4096, (1, 15, 5), generator=torch.Generator().manual_seed(1))
    padded = torch.cat([tokens, tokens[..., -1:].expand(-1, -1, 3)], -1)
    spf = codec.samples_per_frame
    got, full = codec.decode(tokens), codec.decode(padded)
    assert got.shape[-1] == 5 * spf
    np.testing.assert_allclose(got.numpy(), full[..., : 5 * spf].numpy(), atol=ROUNDING)


def test_shorter_windows_come_sooner_and_deviate(snac_codecs):
    """window=(left, lookahead) below the exact context: audio after fewer frames, every sample
    still once, the deviation what the codec page measures (24 kHz, Orpheus's 1 / 2: ~1e-2)."""
    codec = snac_codecs["24khz"]
    tokens = torch.randint(0, 4096, (1, 7, 12), generator=torch.Generator().manual_seed(2))
    whole = codec.decode(tokens)
    spf = codec.samples_per_frame
    off, deviation = {}, {}
    for window in ((3, 3), (2, 2), (1, 2), (1, 0)):
        pieces = []
        with codec.stream_decoder(window=window) as dec:
            for f in range(12):
                pieces.append(dec.push(tokens[..., f : f + 1]))
                # frame f - lookahead is out as soon as frame f is in
                assert sum(p.shape[-1] for p in pieces) == max(0, f + 1 - window[1]) * spf
            pieces.append(dec.flush())
        got = torch.cat(pieces, -1)
        assert got.shape == whole.shape
        off[window] = float((got - whole).abs().max())
        deviation[window] = off[window] / float(whole.std())
    assert off[3, 3] <= SAME_MODEL  # the exact window: the offline decode
    assert 1e-4 < deviation[2, 2] < deviation[1, 2] < deviation[1, 0]
    with pytest.raises(ValueError, match="window must be"):
        codec.stream_decoder(window=(1, -1))


def test_engine_stateful_first_chunk_and_failed_batches(snac_codecs, monkeypatch):
    """A stateful stream's first audio waits for a frame's worth of final samples; a batch that
    fails is retried stream by stream from the states before it (none advanced twice)."""
    from audiotok.models.snac.stream import DecoderStream

    codec = snac_codecs["tiny"]
    engine = Engine({"snac": codec}, EngineSettings(max_streams=8), start=False)
    plan = [dict(frames=f, pushes=[1, 2], opens=o, pace=1) for f, o in ((20, 0), (17, 0),
                                                                          (25, 1), (9, 2))]
    real, calls = DecoderStream.push_together, []

    def flaky(streams, tokens):
        calls.append(len(streams))
        if len(streams) > 1 and len(calls) % 3 == 0:
            raise RuntimeError("a failing batch")
        return real(streams, tokens)

    monkeypatch.setattr(DecoderStream, "push_together", staticmethod(flaky))
    first = []
    real_put = engine._run_streams

    def spy(served, kind, batch, inputs, ending):
        real_put(served, kind, batch, inputs, ending)
        for s in batch:
            if s.samples_out and s.id not in {i for i, _ in first}:
                first.append((s.id, s.samples_out))

    monkeypatch.setattr(engine, "_run_streams", spy)
    run_decode_schedule(engine, codec, plan, 3, name="snac")
    assert any(n > 1 for n in calls) and len(calls) > 10
    assert first and all(n >= codec.samples_per_frame for _, n in first)


def test_stateful_runner_commits_a_step_only_when_all_of_it_ran(snac_codecs, monkeypatch):
    """A step of rows in two groups (1 frame: rows 0 and 1; 2 frames: row 2) whose second group
    fails leaves every row as it was (the first group's results not kept); run again, each
    row advances once."""
    from audiotok.models.snac.stream import DecoderStream
    from audiotok.streaming import TokenChunk
    from audiotok.streaming.steps import StepStreamer

    codec = snac_codecs["tiny"]
    streamer = StepStreamer(codec, "decode")
    rows = [streamer.new() for _ in range(3)]
    inputs = [TokenChunk(torch.zeros(1, 7, n, dtype=torch.long)) for n in (1, 1, 2)]
    real = DecoderStream.push_together

    def second_group_fails(decoders, tokens):
        if tokens.shape[-1] == 2:
            raise RuntimeError("the second group fails")
        return real(decoders, tokens)

    monkeypatch.setattr(DecoderStream, "push_together", staticmethod(second_group_fails))
    before = [row.inner for row in rows]
    with pytest.raises(RuntimeError, match="second group"):
        streamer.step(rows, inputs, [False] * 3)
    assert [row.inner for row in rows] == before and all(r.inner.frames == 0 for r in rows)
    monkeypatch.setattr(DecoderStream, "push_together", staticmethod(real))
    streamer.step(rows, inputs, [False] * 3)
    assert [row.inner.frames for row in rows] == [1, 1, 2]


def test_stateful_stream_ends_once(snac_codecs):
    codec = snac_codecs["tiny"]
    tokens = torch.randint(0, 64, (1, 7, 6), generator=torch.Generator().manual_seed(8))
    with codec.stream_decoder() as dec:
        first = dec.push(tokens)
        rest = dec.flush()
        assert torch.cat([first, rest], -1).shape[-1] == 6 * codec.samples_per_frame
        assert dec.flush().shape == (1, 1, 0)  # a second end gives nothing more
        with pytest.raises(RuntimeError, match="has finished"):
            dec.push(tokens)
    with codec.stream_decoder() as dec:  # nothing pushed: nothing out
        assert dec.flush().shape == (1, 1, 0)
    with pytest.raises(RuntimeError, match="with"):
        codec.stream_decoder().push(tokens)


def test_stateful_stream_state_stays_bounded(snac_codecs):
    """However long the stream, each layer holds the same amount once the audio has started."""

    def held(stream):
        total, todo = 0, [stream.chain]
        while todo:
            step = todo.pop()
            for name in step.STATE:
                value = getattr(step, name)
                total += 0 if value is None else value.numel()
            for name in step.children:
                value = getattr(step, name)
                todo += value if isinstance(value, list) else [value]
        return total

    codec = snac_codecs["tiny_blocks"]
    stream = codec.step_stream("decode")
    tokens = torch.randint(0, 64, (1, 7, 120), generator=torch.Generator().manual_seed(9))
    sizes = []
    with torch.inference_mode():
        for f in range(120):
            stream.push(tokens[..., f : f + 1])
            sizes.append(held(stream))
    assert stream.samples > 0
    align = codec.streaming.window.align
    assert len(set(sizes[40::align])) == 1  # steady: the same at each window phase


def test_stateful_runner_warms_every_shape_and_pushes_the_median(snac_codecs):
    """The warm-up runs each planned shape (every batch size at one frame, every frame count at
    one stream, every batch size at two and three frames) on rows without batch slots; a step
    pushes the lower median of the streams' waiting frames, so that its streams form one or two
    batches rather than one per size."""
    codec = snac_codecs["tiny"]
    engine = Engine({"snac": codec}, EngineSettings(max_streams=8, max_batch=4,
                                                    max_step_frames=3), start=False)
    engine.warmup()
    status = engine.warmup_status()["snac"]
    assert status["complete"] and status["done"] == status["shapes"] == 4 + 2 + 3 + 3
    assert not engine.stats.errors
    from audiotok.server.scheduler import QueueView, StreamView, schedule

    assert engine.models["snac"].runners["decode"].paced
    settings = engine.settings

    def step_units(waiting: list[int]) -> list[int | None]:
        views = tuple(StreamView(i, n or None, n, True, False, float(i), 0.0)
                      for i, n in enumerate(waiting))
        plan = schedule([QueueView("snac", "decode", views, True, 1)], {}, settings, 0.0,
                        windows=False)
        units = dict(zip(plan.streams[0].streams, plan.streams[0].units, strict=True))
        return [units.get(i) for i in range(len(waiting))]

    assert step_units([5, 1, 2, 4, 0]) == [2, 1, 2, 2, None]
    assert step_units([9, 8, 7]) == [3, 3, 3]  # at most max_step_frames
