"""The engine's scheduling function on its own: plain views in, a plan out (no threads, no
models)."""

from audiotok.server.scheduler import QueueView, RequestView, StreamView, schedule, step_frames
from audiotok.server.settings import EngineSettings


def stream(key, ready, *, frames=None, deadline=0.0, new=False, is_open=True, since=0.0):
    """A stream view; frames: what `ready` is in frames (default: ready, or 0)."""
    frames = (ready or 0) if frames is None else frames
    return StreamView(key, ready, frames, is_open, new, deadline, since)


def queue(*streams, paced=True, unit_frames=1, kind="decode"):
    return QueueView("m", kind, tuple(streams), paced, unit_frames)


def test_the_streams_that_run_dry_first_fill_the_batch():
    q = queue(stream("late", 2, deadline=3.0), stream("soon", 2, deadline=1.0),
              stream("mid", 2, deadline=2.0), stream("idle", None))
    plan = schedule([q], {}, EngineSettings(max_batch=2), now=10.0)
    (batch,) = plan.streams
    assert batch.streams == ("soon", "mid") and batch.units == (2, 2)
    assert not plan.requests and plan.due_at is None


def test_a_paced_step_gives_every_stream_the_lower_median_of_the_frames_waiting():
    q = queue(stream("a", 1, deadline=0), stream("b", 4, deadline=1), stream("c", 8, deadline=2),
              stream("d", 20, deadline=3))
    (batch,) = schedule([q], {}, EngineSettings(max_step_frames=8), now=0).streams
    assert batch.units == (1, 4, 4, 4)
    assert step_frames([3, 9, 9], 8) == 8 and step_frames([5], 8) == 5


def test_an_encode_step_counts_samples_in_whole_frames():
    q = queue(stream("a", 3 * 320, frames=3), stream("b", 5 * 320 + 7, frames=5, deadline=1),
              kind="encode", unit_frames=320)
    (batch,) = schedule([q], {}, EngineSettings(), now=0).streams
    # (the lower median of 3 and 5 frames: 3 frames, 960 samples, for both)
    assert batch.kind == "encode" and batch.units == (960, 960)


def test_an_unpaced_runner_takes_what_each_stream_is_ready_with():
    q = queue(stream("a", 1), stream("b", 30), paced=False)
    (batch,) = schedule([q], {}, EngineSettings(max_step_frames=8), now=0).streams
    assert batch.units == (1, 30)


def test_a_batch_waits_for_other_open_streams_until_step_wait():
    settings = EngineSettings(step_wait_ms=20)
    q = queue(stream("a", 2, since=1.0), stream("b", None))
    plan = schedule([q], {}, settings, now=1.005)
    assert not plan and abs(plan.due_at - 1.020) < 1e-9
    assert schedule([q], {}, settings, now=1.020).streams[0].streams == ("a",)
    assert schedule([q], {}, settings, now=1.005, windows=False).streams  # (no waiting)
    # no wait for a new stream's first output, a full batch, or when every open stream is in
    assert schedule([queue(stream("a", 2, new=True), stream("b", None))], {}, settings,
                    now=0).streams
    assert schedule([q], {}, EngineSettings(max_batch=1, step_wait_ms=20), now=1.005).streams
    finishing = queue(stream("a", 2, since=1.0), stream("b", None, is_open=False))
    assert schedule([finishing], {}, settings, now=1.005).streams


def test_offline_requests_wait_for_company_then_run_by_kind_within_the_limits():
    settings = EngineSettings(batch_wait_ms=2, max_offline_batch=5,
                              max_offline_batch_seconds=25)
    reqs = [RequestView("r0", "decode", 10, 0.0), RequestView("r1", "encode", 10, 0.0005),
            RequestView("r2", "decode", 10, 0.0006), RequestView("r3", "decode", 10, 0.0007)]
    plan = schedule([], {"m": reqs}, settings, now=0.001)
    assert not plan and abs(plan.due_at - 0.002) < 1e-9
    (batch,) = schedule([], {"m": reqs}, settings, now=0.002).requests
    assert batch.kind == "decode" and batch.requests == ("r0", "r2")  # 30 s would pass 25
    many = [RequestView(f"q{i}", "encode", 1, 0.0) for i in range(6)]
    (batch,) = schedule([], {"m": many}, settings, now=0.0).requests  # a full batch: at once
    assert batch.requests == ("q0", "q1", "q2", "q3", "q4")
