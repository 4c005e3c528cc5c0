"""Engine steps as CUDA graphs (streaming/graphs.py GraphedSteps): batches padded to bucket sizes,
one capture per (bucket, frames), rows gathered and written back around a pure function. The
capture itself needs a GPU (benchmarks/system/gpu.py); here torch.fx's make_fx stands in for it
with the property that matters: what runs is fixed when a shape is first seen, and later calls
of that shape only bring new values (new tokens, other frame counts per row, other streams'
state)."""

import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from audiotok.server import Engine, EngineSettings
from audiotok.streaming.graphs import BUCKETS, bucket
from tests.server.schedules import TOL, random_tokens, run_decode_schedule


def finish_and_check(engine, codec, streams, tokens, tol=TOL) -> None:
    """Finish the streams, step until done, and compare each with offline decode."""
    for s in streams:
        if s.state == "open":
            s.finish()
    while engine.step():
        pass
    for s, t in zip(streams, tokens, strict=True):
        want = codec.decode(t)[0, 0].cpu().numpy()
        assert np.abs(np.concatenate(list(s)) - want).max() <= tol


class TraceCapture:
    """capture_cuda's stand-in: records the step once per shape, replays the recording."""

    def __init__(self, fail: bool = False):
        self.shapes: list[tuple[int, int]] = []  # (batch, input length)
        self.fail = fail

    def __call__(self, fn, args):
        self.shapes.append((args[0].shape[0], args[0].shape[-1]))
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        traced = make_fx(fn)(*args)
        return lambda *new: tuple(t.clone() for t in traced(*new))


def graphed_engine(codec, capture, **settings):
    engine = Engine({"s2": codec}, EngineSettings(**settings), start=False)
    for runner in engine.models["s2"].runners.values():
        runner.streamer.use_graphs(capture=capture)
    return engine


def test_buckets():
    assert [bucket(n) for n in (1, 2, 3, 5, 9, 16, 17, 200, 256, 257, 600)] == \
        [1, 2, 4, 8, 16, 16, 32, 256, 256, 512, 768]
    assert all(bucket(b) == b for b in BUCKETS)


def test_graphed_decode_streams_equal_offline(s2_codec):
    """Streams open at different steps and push 1-3 frames: batches of 1-5 streams with mixed
    frame counts run as graphs of 1, 2, 4 and 8 rows, each captured once; every stream's audio
    equals its offline decode."""
    capture = TraceCapture()
    engine = graphed_engine(s2_codec, capture, max_streams=8, max_batch=8, max_step_frames=2)
    plan = [(0, 1, 10), (0, 2, 9), (1, 3, 12), (2, 1, 7), (4, 2, 11)]  # opens, push, frames
    run_decode_schedule(engine, s2_codec, [dict(opens=o, pushes=[p], frames=n, pace=1)
                                           for o, p, n in plan], seed=0)
    graphs = engine.models["s2"].runners["decode"].streamer.graphs.graphs
    assert graphs.failed == {}
    assert len(capture.shapes) == len(set(capture.shapes))  # one capture per shape
    assert {b for b, _ in capture.shapes} <= set(BUCKETS)
    assert {f for _, f in capture.shapes} <= {1, 2}  # frames padded to buckets too
    assert {b for b, _ in capture.shapes} >= {1, 4, 8}
    assert set(engine.stats.batch_sizes) - set(BUCKETS)  # real batches of other sizes ran


def test_warmup_captures_every_bucket_so_serving_captures_none(s2_codec):
    """Engine.warmup with graphs runs one step per (batch, frames) bucket (3 frames per step at
    most pad to 4); afterwards streams capture nothing new, and a step of 3 frames runs as the
    4-frame graph, exactly. (Decode graphed only: tracing the encoder takes longer.)"""
    engine = Engine({"s2": s2_codec}, EngineSettings(max_streams=2, max_batch=2,
                                                     max_step_frames=3), start=False)
    capture = TraceCapture()
    engine.models["s2"].runners["decode"].streamer.use_graphs(capture=capture)
    engine.warmup()
    assert sorted(capture.shapes) == [(b, f) for b in (1, 2) for f in (1, 2, 4)]
    tokens = [random_tokens(s2_codec, 7, seed) for seed in range(2)]
    streams = [engine.open_decode_stream("s2") for _ in tokens]
    for i, (s, t) in enumerate(zip(streams, tokens, strict=True)):
        s.push(t[:, :3 + i])  # 3 and 4 frames waiting: a step of 3 frames (the lower median)
    engine.step()
    assert [s.frames_out for s in streams] == [3, 3]
    for i, (s, t) in enumerate(zip(streams, tokens, strict=True)):
        s.push(t[:, 3 + i:])
    finish_and_check(engine, s2_codec, streams, tokens)
    assert len(capture.shapes) == 6
    assert engine.models["s2"].runners["decode"].streamer.graphs.graphs.failed == {}


def test_graphed_encode_streams_equal_offline(s2_codec):
    rng = np.random.default_rng(5)
    spf = s2_codec.samples_per_frame
    audio = [rng.standard_normal(n).astype(np.float32) * 0.1 for n in (spf * 4 + 100, spf * 6)]
    engine = graphed_engine(s2_codec, TraceCapture(), max_streams=4, max_step_frames=2)
    streams = [engine.open_encode_stream("s2") for _ in audio]
    for s, a in zip(streams, audio, strict=True):
        for start in range(0, a.size, 3000):
            s.push(a[start: start + 3000])
        s.finish()
    while engine.step():
        pass
    for s, a in zip(streams, audio, strict=True):
        got = np.concatenate(list(s), axis=1)
        want = s2_codec.encode(torch.from_numpy(a), s2_codec.sample_rate).tokens[0].numpy()
        assert np.array_equal(got, want)
    assert engine.models["s2"].runners["encode"].streamer.graphs.graphs.failed == {}


def test_a_shape_that_cannot_be_captured_runs_eagerly(s2_codec):
    capture = TraceCapture(fail=True)
    engine = graphed_engine(s2_codec, capture, max_step_frames=2)
    tokens = [random_tokens(s2_codec, 5, seed) for seed in range(3)]
    streams = [engine.open_decode_stream("s2") for _ in tokens]
    for s, t in zip(streams, tokens, strict=True):
        s.push(t)
    finish_and_check(engine, s2_codec, streams, tokens)
    failed = engine.models["s2"].runners["decode"].streamer.graphs.graphs.failed
    assert failed and all("capturing" in why for why in failed.values())
    assert len(capture.shapes) == len(set(capture.shapes))  # a failed shape is not retried


def test_a_failing_graphed_step_leaves_the_rows_as_they_were(s2_codec, monkeypatch):
    """A replay that fails (a device error) writes nothing back: the engine retries the streams
    one by one, and they stay exact."""
    capture = TraceCapture()
    engine = graphed_engine(s2_codec, capture, max_step_frames=1)
    tokens = [random_tokens(s2_codec, 4, seed) for seed in range(2)]
    streams = [engine.open_decode_stream("s2") for _ in tokens]
    graphs = engine.models["s2"].runners["decode"].streamer.graphs.graphs
    call, failures = type(graphs).__call__, []

    def fails_once_with_two_rows(self, *args):
        if args[0].shape[0] == 2 and not failures:
            call(self, *args)  # the step runs (state computed), then the device fails
            failures.append(1)
            raise RuntimeError("simulated device error")
        return call(self, *args)

    monkeypatch.setattr(type(graphs), "__call__", fails_once_with_two_rows)
    for f in range(4):
        for s, t in zip(streams, tokens, strict=True):
            s.push(t[:, f: f + 1])
        engine.step()
    finish_and_check(engine, s2_codec, streams, tokens)
    assert failures == [1]
    assert engine.stats.errors.get("EngineError", 0) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphed_steps_equal_offline(monkeypatch):
    """On the GPU, with TF32 off (cuDNN convolutions use it by default, which rounds
    differently per shape): graphed streams equal offline decode within 1e-4."""
    import audiotok
    from tests.conftest import S2_TINY

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    codec = audiotok.load(S2_TINY / "codec.pth", device="cuda", cuda_graphs=True)
    engine = Engine({"s2": codec}, EngineSettings(max_step_frames=2), start=False)
    tokens = [random_tokens(codec, 6, seed) for seed in range(3)]
    streams = [engine.open_decode_stream("s2") for _ in tokens]
    for f in range(0, 6, 2):
        for s, t in zip(streams, tokens, strict=True):
            s.push(t[:, f: f + 2])
        engine.step()
    finish_and_check(engine, codec, streams, tokens, tol=1e-4)
    assert engine.models["s2"].runners["decode"].streamer.graphs.graphs.failed == {}
