"""The serving engine: many streams batched step by step, each exactly its own offline result,
whatever the others do; admission, failures, offline batching, shutdown."""

import asyncio
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from audiotok.errors import AudioError, CodesError
from audiotok.server import (
    Engine,
    EngineBusy,
    EngineError,
    EngineSettings,
    StreamClosed,
    WindowSettings,
)
from tests.server.schedules import TOL, random_tokens, run_decode_schedule, run_encode_streams

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                       HealthCheck.too_slow])


def drain(stream) -> list[np.ndarray]:
    return stream.available()


def push_randomly(engine, stream, tokens, seed: int = 1) -> np.ndarray:
    """All of a decode stream's audio, its tokens pushed 1-8 frames at a time, the engine
    stepped by hand after each push and until it is done."""
    got, sent, rng = [], 0, np.random.default_rng(seed)
    while sent < tokens.shape[1]:
        n = int(rng.integers(1, 9))
        stream.push(tokens[:, sent: sent + n])
        sent += n
        engine.step()
        got += drain(stream)
    stream.finish()
    while engine.step():
        got += drain(stream)
    return np.concatenate(got + drain(stream))


@st.composite
def schedules(draw):
    """Streams (frames, push sizes, the step at which each opens) and the engine's limits."""
    n = draw(st.integers(1, 16))
    streams = [dict(frames=draw(st.integers(1, 40)),
                    pushes=draw(st.lists(st.integers(1, 8), min_size=1, max_size=5)),
                    opens=draw(st.integers(0, 12)),
                    pace=draw(st.integers(1, 3)))  # pushes every `pace` steps
               for _ in range(n)]
    return streams, draw(st.integers(1, 16)), draw(st.integers(1, 8)), draw(st.integers(0, 10**6))


def _streams(n, frames, pushes, opens, pace):
    return [dict(frames=frames(i), pushes=pushes, opens=opens(i), pace=pace(i)) for i in range(n)]


# the corners first, then random schedules: the most streams, one per step and one frame each;
# every stream in every step with up to 8 frames, opening and pacing apart; one lone frame
CORNERS = [(_streams(16, lambda i: 12, [8], lambda i: 0, lambda i: 1), 1, 1, 1),
           (_streams(16, lambda i: 1 + 5 * i % 40, [1, 8, 3], lambda i: i % 13,
                     lambda i: 1 + i % 3), 16, 8, 2),
           (_streams(1, lambda i: 1, [1], lambda i: 0, lambda i: 1), 16, 8, 3)]


@settings(max_examples=25, **SETTINGS)
@given(plan=schedules())
@example(plan=CORNERS[0])
@example(plan=CORNERS[1])
@example(plan=CORNERS[2])
def test_decode_streams_equal_offline_under_random_schedules(s2_codec, plan):
    """Streams open, push 1..8 frames at a time and finish at random steps, batches of 1..16
    with any number of frames per stream: each stream's audio equals offline decode; the corners
    first, then 25 random schedules."""
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"s2": s2_codec}, EngineSettings(max_streams=16, max_batch=max_batch,
                                                     max_step_frames=max_step_frames),
                    start=False)
    run_decode_schedule(engine, s2_codec, streams, seed)
    assert sorted(engine.stats.batch_sizes) and max(engine.stats.batch_sizes) <= max_batch


def test_neighbours_do_not_change_a_stream(s2_codec):
    """One stream pushed frame by frame alone, and with 7 neighbours pushing other sizes in the
    same steps (8 frames padded batches): the same audio, equal to offline within 1e-5."""
    tokens = random_tokens(s2_codec, 24, 7)
    outs = []
    for neighbours in (0, 7):
        engine = Engine({"s2": s2_codec}, EngineSettings(max_batch=16), start=False)
        me = engine.open_decode_stream("s2")
        others = [engine.open_decode_stream("s2") for _ in range(neighbours)]
        got = []
        for f in range(24):
            me.push(tokens[:, f: f + 1])
            for j, o in enumerate(others):
                o.push(random_tokens(s2_codec, 1 + (f + j) % 8, 100 * j + f))
            engine.step()
            got += drain(me)
        outs.append(np.concatenate(got))
        assert max(engine.stats.batch_sizes) == neighbours + 1
    offline = s2_codec.decode(tokens)[0, 0].numpy()
    assert np.abs(outs[0] - offline).max() <= TOL
    assert np.abs(outs[1] - offline).max() <= TOL


def test_encode_streams_equal_offline(s2_codec):
    rng = np.random.default_rng(3)
    lengths = [1000, 2048 * 5, 2048 * 7 + 333, 50_000]
    audio = [rng.standard_normal(n).astype(np.float32) * 0.1 for n in lengths]
    engine = Engine({"s2": s2_codec}, EngineSettings(max_batch=3, max_step_frames=3),
                    start=False)
    run_encode_streams(engine, s2_codec, audio, rng)


def test_bad_push_fails_alone_and_the_stream_goes_on(s2_codec):
    engine = Engine({"s2": s2_codec}, start=False)
    good, bad = engine.open_decode_stream("s2"), engine.open_decode_stream("s2")
    tokens = random_tokens(s2_codec, 6, 1)
    with pytest.raises(CodesError, match=r"must be \[10, t\].*\(9, 3\)"):
        bad.push(tokens[:9, :3])
    high = tokens[:, :3].clone()
    high[4, 1] = 64
    with pytest.raises(CodesError, match="token 64 at codebook 4, frame 1 .* outside 0..63"):
        bad.push(high)
    with pytest.raises(CodesError, match="integers"):
        bad.push(tokens.float())
    good.push(tokens)
    bad.push(tokens[:, :2])  # still usable after refused pushes
    good.finish()
    bad.finish()
    while engine.step():
        pass
    assert np.abs(np.concatenate(list(good)) - s2_codec.decode(tokens)[0, 0].numpy()).max() \
        <= TOL
    assert np.concatenate(list(bad)).shape == (2 * 2048,)
    clamped = engine.open_decode_stream("s2", clamp=True)
    clamped.push(high)
    clamped.finish()
    while engine.step():
        pass
    want = s2_codec.decode(high[None], clamp=True)[0, 0].numpy()
    assert np.abs(np.concatenate(list(clamped)) - want).max() <= TOL


def test_a_failing_step_fails_only_its_stream(s2_codec, monkeypatch):
    """A model error inside a batch: the batch is retried one stream at a time, the stream that
    fails alone gets the error, its neighbours' audio stays exact."""
    engine = Engine({"s2": s2_codec}, start=False)
    a, b, c = (engine.open_decode_stream("s2") for _ in range(3))
    runner = engine.models["s2"].runners["decode"]
    run = runner.run

    def flaky(streams, inputs, ending):
        if any(s is b for s in streams):
            raise RuntimeError("simulated device error")
        return run(streams, inputs, ending)

    monkeypatch.setattr(runner, "run", flaky)
    tokens = random_tokens(s2_codec, 5, 2)
    for s in (a, b, c):
        s.push(tokens)
        s.finish()
    while engine.step():
        pass
    with pytest.raises(EngineError, match="simulated device error"):
        b.read()
    assert b.state == "failed"
    want = s2_codec.decode(tokens)[0, 0].numpy()
    for s in (a, c):
        assert np.abs(np.concatenate(list(s)) - want).max() <= TOL
    assert engine.stats.errors["EngineError"] == 1


def test_a_step_failing_inside_the_model_leaves_every_state_as_it_was(s2_codec, monkeypatch):
    """The model fails after every streaming module has run (a run of slots is passed to the
    model as views of the table's rows): the rows are as before the step, so the streams,
    retried one at a time, stay exact; so does a batch of slots that are not consecutive."""
    engine = Engine({"s2": s2_codec}, EngineSettings(max_streams=4), start=False)
    streams = [engine.open_decode_stream("s2") for _ in range(4)]
    streams[1].abort()  # slots 0, 2, 3 remain: not a run
    engine.step()
    tokens = [random_tokens(s2_codec, 6, seed) for seed in range(4)]
    tanh, failures = torch.nn.Tanh.forward, []

    def fails_in_batches(self, x):  # the decoder's last module
        if x.shape[0] > 1 and len(failures) < 2:
            failures.append(x.shape[0])
            raise RuntimeError("simulated device error")
        return tanh(self, x)

    for i in (0, 2, 3):
        streams[i].push(tokens[i][:, :2])
    engine.step()  # slots 0, 2, 3 hold two frames each
    monkeypatch.setattr(torch.nn.Tanh, "forward", fails_in_batches)
    for i in (0, 2, 3):
        streams[i].push(tokens[i][:, 2:])
        streams[i].finish()
    while engine.step():
        pass
    assert failures == [3]
    for i in (0, 2, 3):
        want = s2_codec.decode(tokens[i])[0, 0].numpy()
        assert np.abs(np.concatenate(list(streams[i])) - want).max() <= TOL
    assert engine.stats.errors.get("EngineError", 0) == 0

    # a run of slots: 0 and 1
    a, b = engine.open_decode_stream("s2"), engine.open_decode_stream("s2")
    runner = engine.models["s2"].runners["decode"]
    assert [runner.row(a).slots, runner.row(b).slots] == [[0], [1]]
    failures.clear()
    for s, t in ((a, tokens[0]), (b, tokens[1])):
        s.push(t[:, :3])
    engine.step()
    for s, t in ((a, tokens[0]), (b, tokens[1])):
        s.push(t[:, 3:])
        s.finish()
    while engine.step():
        pass
    assert failures == [2, 2]
    for s, t in ((a, tokens[0]), (b, tokens[1])):
        want = s2_codec.decode(t)[0, 0].numpy()
        assert np.abs(np.concatenate(list(s)) - want).max() <= TOL


def test_admission_limits(s2_codec):
    engine = Engine({"s2": s2_codec}, EngineSettings(max_streams=2, max_backlog_seconds=1.0,
                                                     max_queued_requests=2), start=False)
    a, b = engine.open_decode_stream("s2"), engine.open_decode_stream("s2")
    with pytest.raises(EngineBusy, match="2 open streams"):
        engine.open_decode_stream("s2")
    with pytest.raises(EngineBusy, match="input waiting"):
        a.push(random_tokens(s2_codec, 30, 0))  # 1.4 s of audio waiting > 1 s
    a.push(random_tokens(s2_codec, 20, 0))
    b.abort()  # a client that went away: its slot is free after the next step
    assert b.read() is None
    with pytest.raises(StreamClosed):
        b.push(random_tokens(s2_codec, 1, 0))
    engine.step()
    c = engine.open_decode_stream("s2")
    assert engine.models["s2"].runners["decode"].has_row(c)  # b's, freed
    engine.encode("s2", np.zeros(100, np.float32))
    engine.encode("s2", np.zeros(100, np.float32))
    with pytest.raises(EngineBusy, match="2 requests queued"):
        engine.encode("s2", np.zeros(100, np.float32))
    with pytest.raises(EngineError, match="unknown model 'x'; loaded: s2"):
        engine.open_decode_stream("x")
    with pytest.raises(AudioError, match="NaN"):
        engine.encode("s2", np.array([0.0, np.nan], np.float32))


def test_unread_output_is_bounded(s2_codec):
    engine = Engine({"s2": s2_codec}, EngineSettings(max_backlog_seconds=0.5), start=False)
    s = engine.open_decode_stream("s2")
    tokens = random_tokens(s2_codec, 10, 0)  # 0.46 s
    s.push(tokens)
    engine.step()
    s.push(tokens[:, :2])
    engine.step()
    with pytest.raises(EngineBusy, match="output unread"):
        s.push(tokens[:, :1])
    s.read()
    s.push(tokens[:, :1])


def test_released_slots_are_reset(s2_codec):
    """A slot used by a stream, then released, gives its next stream a fresh state."""
    engine = Engine({"s2": s2_codec}, EngineSettings(max_streams=1, max_step_frames=4),
                    start=False)
    assert engine.warmup() > 0 and engine.rows_in_use() == 0  # leaves used slots behind
    tokens = random_tokens(s2_codec, 9, 4)
    want = s2_codec.decode(tokens)[0, 0].numpy()
    for _ in range(3):
        s = engine.open_decode_stream("s2")
        s.push(tokens)
        s.finish()
        while engine.step():
            pass
        assert np.abs(np.concatenate(list(s)) - want).max() <= TOL


def test_offline_requests_batch_and_equal_the_library(s2_codec, xc_codec):
    engine = Engine({"s2": s2_codec, "xc": xc_codec}, EngineSettings(batch_wait_ms=50))
    try:
        rng = np.random.default_rng(0)
        audio = [rng.standard_normal(n).astype(np.float32) * 0.1 for n in (3000, 9000, 20000)]
        futures = [engine.encode(m, a) for a in audio for m in ("s2", "xc")]
        results = [f.result(timeout=120) for f in futures]
        for (a, m), got in zip([(a, m) for a in audio for m in ("s2", "xc")], results,
                               strict=True):
            codec = s2_codec if m == "s2" else xc_codec
            np.testing.assert_array_equal(got, codec.encode(torch.from_numpy(a)).tokens[0])
        assert max(engine.stats.batch_sizes) == 3  # 3 requests per model in the 50 ms window
        tokens = results[::2]
        futures = [engine.decode("s2", t, num_samples=len(a))
                   for t, a in zip(tokens, audio, strict=True)]
        decoded = [f.result(timeout=120) for f in futures]
        for t, a, got in zip(tokens, audio, decoded, strict=True):
            want = s2_codec.decode(torch.from_numpy(t)[None])[0, 0, : len(a)].numpy()
            assert got.shape == (len(a),) and np.abs(got - want).max() <= TOL
        asyncio.run(_async_roundtrip(engine, s2_codec))
    finally:
        assert engine.close(timeout=30)


async def _async_roundtrip(engine, codec):
    tokens = random_tokens(codec, 7, 9)
    audio = await engine.adecode("s2", tokens)
    s = engine.open_decode_stream("s2")
    for f in range(7):
        s.push(tokens[:, f: f + 1])
    s.finish()
    chunks = [c async for c in s]
    assert np.abs(np.concatenate(chunks) - audio).max() <= TOL


def test_threads_push_and_read_concurrently(s2_codec):
    """The blocking API from many threads at once, with the worker running: every stream
    exact."""
    engine = Engine({"s2": s2_codec}, EngineSettings(max_batch=8))
    errors = []

    def client(i):
        try:
            tokens = random_tokens(s2_codec, 12 + i, i)
            with engine.open_decode_stream("s2") as s:
                for f in range(0, tokens.shape[1], 1 + i % 4):
                    s.push(tokens[:, f: f + 1 + i % 4])
                    time.sleep(0.001 * (i % 3))
                s.finish()
                got = np.concatenate([c for c in s])
            assert np.abs(got - s2_codec.decode(tokens)[0, 0].numpy()).max() <= TOL
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert engine.close(timeout=30)
    assert not errors, errors
    assert max(engine.stats.batch_sizes) > 1


def test_close_drains_then_refuses(s2_codec):
    engine = Engine({"s2": s2_codec})
    s = engine.open_decode_stream("s2")
    tokens = random_tokens(s2_codec, 20, 5)
    s.push(tokens)
    s.finish()
    assert engine.close(timeout=60)  # waits for the stream to be decoded to the end
    assert np.concatenate(list(s)).shape == (20 * 2048,)
    with pytest.raises(StreamClosed, match="shutting down"):
        engine.open_decode_stream("s2")
    engine2 = Engine({"s2": s2_codec})
    hung = engine2.open_decode_stream("s2")  # never finished by its client
    assert not engine2.close(timeout=0.5)
    with pytest.raises(StreamClosed, match="cut off"):
        hung.read()


def test_xcodec2_windowed_stream_has_exact_length(xc_codec):
    """Any push sizes, any window: every frame's samples come out once (total = frames x 320),
    and with a window covering the whole input the audio equals offline decode."""
    tokens = random_tokens(xc_codec, 83, 3)
    offline = xc_codec.decode(tokens)[0, 0].numpy()
    for window in (WindowSettings(4, 3, 2), WindowSettings(0, 1, 0), WindowSettings(50, 25, 10),
                   WindowSettings(100, 100, 100)):
        engine = Engine({"xc": xc_codec}, EngineSettings(window=window), start=False)
        s = engine.open_decode_stream("xc")
        with pytest.raises(EngineError, match="not causal"):
            engine.open_encode_stream("xc")
        audio = push_randomly(engine, s, tokens)
        assert audio.shape == offline.shape, window
        if window.chunk >= 83:
            assert np.abs(audio - offline).max() <= TOL


def test_a_long_backlog_does_not_pad_every_row(s2_codec):
    """A stream that pushed 60 frames at once (a model ahead of real time) next to three
    real-time streams with one frame each: steps take one frame per row (the lower median), so
    the real-time streams are not padded to 8 frames; everyone still ends exact."""
    engine = Engine({"s2": s2_codec}, EngineSettings(max_step_frames=8), start=False)
    ahead = engine.open_decode_stream("s2")
    live = [engine.open_decode_stream("s2") for _ in range(3)]
    tokens = random_tokens(s2_codec, 60, 1)
    ahead.push(tokens)
    ahead.finish()
    runner = engine.models["s2"].runners["decode"]
    run, widths = runner.run, []

    def recording(streams, inputs, ending):
        widths.append(max(x.tokens.shape[-1] for x in inputs))
        return run(streams, inputs, ending)

    runner.run = recording
    live_tokens = [random_tokens(s2_codec, 6, 10 + i) for i in range(3)]
    outs = {id(s): [] for s in (ahead, *live)}
    for f in range(6):
        for s, t in zip(live, live_tokens, strict=True):
            s.push(t[:, f: f + 1])
        engine.step()
        for s in (ahead, *live):
            outs[id(s)] += drain(s)
    assert widths == [1] * 6  # with 3 of 4 rows at one frame, no row is padded
    for s in live:
        s.finish()
    while engine.step():
        for s in (ahead, *live):
            outs[id(s)] += drain(s)
    assert max(widths[6:]) == 8  # alone, the backlog goes 8 frames per step
    for s, t in ((ahead, tokens), *zip(live, live_tokens, strict=True)):
        want = s2_codec.decode(t)[0, 0].numpy()
        assert np.abs(np.concatenate(outs[id(s)]) - want).max() <= TOL


def test_warmup_runs_between_real_steps(s2_codec, xc_codec):
    """start_warmup plans every shape, the first phase ((1 stream, 1 frame) per model and kind)
    first; the worker runs one shape per step, between the real work, so a stream opened during
    warm-up is served at once and exactly; the engine is ready when every shape is done, with
    no slot left leased."""
    engine = Engine({"s2": s2_codec, "xc": xc_codec},
                    EngineSettings(max_streams=4, max_batch=3, max_step_frames=3), start=False)
    assert engine.ready() and engine.warmup_status() == {}  # no warm-up asked for: ready
    engine.start_warmup()
    status = engine.warmup_status()
    # S2, decode and encode: batches 1..3 at one frame, then 2..3 frames at one stream, then
    # batches 2..3 at two and at three frames; X-Codec2: one window of its stream decoding
    assert status["s2"]["shapes"] == 2 * (3 + 2 + 2 + 2) and status["xc"]["shapes"] == 1
    assert not engine.ready() and status["s2"]["done"] == 0
    tokens = random_tokens(s2_codec, 6, 11)
    s = engine.open_decode_stream("s2")
    s.push(tokens[:, :3])
    assert engine.step()  # the stream's step, and one warm-up shape
    got = s.available()
    assert sum(p.shape[0] for p in got) == 3 * s2_codec.samples_per_frame
    steps = 1
    while any(m["first_phase_after_s"] is None for m in engine.warmup_status().values()):
        assert engine.step()
        steps += 1
    assert steps == 3  # the first phase: three shapes, one per step
    status = engine.warmup_status()
    assert not engine.ready() and not status["s2"]["complete"] and status["s2"]["done"] == 2
    assert status["xc"]["complete"] and status["xc"]["first_phase_after_s"] is not None
    s.push(tokens[:, 3:])
    s.finish()
    while engine.step():
        pass
    status = engine.warmup_status()
    assert engine.ready()
    assert status["s2"]["complete"] and status["s2"]["done"] == status["s2"]["shapes"] == 18
    assert status["s2"]["seconds"] > 0 and status["s2"]["complete_after_s"] >= \
        status["s2"]["first_phase_after_s"]
    got += list(s)
    want = s2_codec.decode(tokens)[0, 0].numpy()
    assert np.abs(np.concatenate(got) - want).max() <= TOL
    assert engine.rows_in_use() == 0


def test_a_stream_opened_while_warmup_holds_the_last_slot_is_served(s2_codec):
    """With one slot, a stream opened while a warm-up step holds it is admitted (not refused),
    gets the slot when that step ends, and decodes exactly."""
    engine = Engine({"s2": s2_codec}, EngineSettings(max_streams=1, max_batch=1), start=False)
    runner = engine.models["s2"].runners["decode"]
    warm, opened = runner.warm_rows, []

    def warm_and_open(rows, frames):
        if not opened:  # a client arrives during the first warm-up step
            assert runner.room() == 0
            opened.append(engine.open_decode_stream("s2"))
            assert not runner.has_row(opened[0])
        warm(rows, frames)

    runner.warm_rows = warm_and_open
    engine.start_warmup()
    tokens = random_tokens(s2_codec, 7, 5)
    assert engine.step() and opened and runner.has_row(opened[0])
    s = opened[0]
    s.push(tokens)
    s.finish()
    while engine.step():
        pass
    want = s2_codec.decode(tokens)[0, 0].numpy()
    assert np.abs(np.concatenate(list(s)) - want).max() <= TOL
    assert engine.warmup_status()["s2"]["complete"] and engine.rows_in_use() == 0


def test_warm_grid_covers_two_and_three_frame_batches():
    """After late steps streams have two or three frames waiting: every batch size is warmed at
    two and three frames too (each shape once, (1, 1) first), never more frames than a step
    takes; more frames at one stream only."""
    from audiotok.streaming.layers import warm_grid

    grid = warm_grid(4, 5)
    assert grid[0] == (1, 1) and len(grid) == len(set(grid)) == 4 + 4 + 3 + 3
    assert {(b, f) for b in range(1, 5) for f in (1, 2, 3)} <= set(grid)
    assert (2, 4) not in grid and (1, 5) in grid
    assert set(warm_grid(3, 2)) == {(b, f) for b in (1, 2, 3) for f in (1, 2)}
    assert warm_grid(3, 1) == [(1, 1), (2, 1), (3, 1)]
