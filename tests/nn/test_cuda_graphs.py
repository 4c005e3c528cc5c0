"""The CUDA graph cache: one capture per input shape, least recently used dropped, failures
remembered and run eagerly. The capture itself needs a GPU (benchmarks/system/gpu.py); here a
stand-in records what would be captured."""

import pytest
import torch

from audiotok.nn.cuda_graphs import GraphCache
from tests.bounds import SAME_MODEL


class FakeCapture:
    def __init__(self, fail_shapes=()):
        self.captured: list[tuple] = []
        self.fail_shapes = set(fail_shapes)

    def __call__(self, fn, args):
        shape = tuple(args[0].shape)
        self.captured.append(shape)
        if shape in self.fail_shapes:
            raise RuntimeError("operation not permitted when stream is capturing")
        return lambda *a: fn(*a) + 0  # a replay: the same function on new inputs


def test_one_capture_per_shape_then_replays():
    capture = FakeCapture()
    cache = GraphCache(lambda x: x * 2, capture=capture)
    for n in (3, 3, 5, 3, 5):
        x = torch.arange(n, dtype=torch.float32)
        assert torch.equal(cache(x), x * 2)
    assert capture.captured == [(3,), (5,)]
    assert cache.failed == {}


def test_dtype_is_part_of_the_key():
    capture = FakeCapture()
    cache = GraphCache(lambda x: x + 1, capture=capture)
    cache(torch.zeros(4))
    cache(torch.zeros(4, dtype=torch.float64))
    assert len(capture.captured) == 2


def test_least_recently_used_graph_is_dropped():
    capture = FakeCapture()
    cache = GraphCache(lambda x: x, max_graphs=2, capture=capture)
    for n in (1, 2, 1, 3, 1, 2):  # 2 is dropped when 3 arrives (1 was used more recently)
        cache(torch.zeros(n))
    assert capture.captured == [(1,), (2,), (3,), (2,)]
    assert [k[0][0] for k in cache.graphs] == [(1,), (2,)]


def test_failed_capture_runs_eagerly_and_is_not_retried():
    capture = FakeCapture(fail_shapes={(7,)})
    calls = []

    def fn(x):
        calls.append(x.shape[0])
        return x - 1

    cache = GraphCache(fn, capture=capture)
    for _ in range(3):
        assert torch.equal(cache(torch.ones(7)), torch.zeros(7))
    assert capture.captured == [(7,)]
    assert calls == [7, 7, 7]  # eager each time
    assert "stream is capturing" in next(iter(cache.failed.values()))


def test_tuple_outputs_are_compared_and_copied_whole():
    from audiotok.nn.cuda_graphs import _clone, _same

    a, b = torch.arange(3.0), torch.arange(4)
    out = (a, b)
    copy = _clone(out)
    assert isinstance(copy, tuple) and _same(copy, out)
    assert copy[0].data_ptr() != a.data_ptr() and copy[1].data_ptr() != b.data_ptr()
    assert not _same((a, b + 1), out)
    assert not _same((a,), out) and not _same(a, out)


def test_shared_input_buffers_by_position_shape_and_dtype():
    """Graphs replayed one at a time share input buffers: an argument reuses the buffer of an
    earlier graph's argument at its position with its shape and dtype, never another argument's
    of the same call (keys and values of one layer have one shape)."""
    from audiotok.nn.cuda_graphs import static_inputs

    buffers: dict = {}
    k, v, frames = torch.ones(2, 3), torch.full((2, 3), 2.0), torch.tensor([1, 2])
    first = static_inputs((k, v, frames), buffers)
    assert first[0].data_ptr() != first[1].data_ptr()
    assert [t.tolist() for t in first] == [k.tolist(), v.tolist(), frames.tolist()]
    second = static_inputs((v, k, torch.tensor([3, 4])), buffers)  # another graph, same shapes
    assert [a.data_ptr() for a in second] == [a.data_ptr() for a in first]
    assert second[0].tolist() == v.tolist() and second[2].tolist() == [3, 4]
    third = static_inputs((torch.ones(4, 3), v, frames.float()), buffers)  # new shape, dtype
    assert third[0].data_ptr() != first[0].data_ptr() and third[1].data_ptr() == first[1].data_ptr()
    assert third[2].data_ptr() != first[2].data_ptr()
    assert len(buffers) == 5
    alone = static_inputs((k, v), None)  # no sharing: plain copies
    assert alone[0].data_ptr() not in {t.data_ptr() for t in buffers.values()}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_capture_matches_eager():
    from audiotok.nn.cuda_graphs import capture_cuda

    layer = torch.nn.Linear(16, 16).cuda()
    with torch.inference_mode():
        x = torch.randn(4, 16, device="cuda")
        replay = capture_cuda(layer, (x,))
        y = torch.randn(4, 16, device="cuda")
        torch.testing.assert_close(replay(y), layer(y))

        def two(x):
            return layer(x), x * 2

        buffers: dict = {}
        replay = capture_cuda(two, (x,), pool=torch.cuda.graph_pool_handle(), buffers=buffers)
        got = replay(y)
        torch.testing.assert_close(got[0], layer(y))
        torch.testing.assert_close(got[1], y * 2)
        assert len(buffers) == 1


@pytest.mark.parametrize("codec_name, golden_name, signals, kinds", [
    ("s2_codec", "s2_golden", ["audio_132377"], ["decode", "encode"]),
    ("xc_codec", "xc_golden", ["n49120_waveform"], ["decode", "encode"]),
    ("xc_codec", "xc_golden", ["n49120_waveform", "n8000_waveform"],
     ["decode_padded", "encode_padded"]),
])
def test_codec_routes_calls_through_graphs(monkeypatch, request, codec_name, golden_name,
                                           signals, kinds):
    """With graphs on, whole encode/decode calls go through one cache per call kind (CPU here,
    with the stand-in capture), giving the same tokens and audio as without."""
    import audiotok.codec

    codec, golden = request.getfixturevalue(codec_name), request.getfixturevalue(golden_name)
    capture = FakeCapture()
    monkeypatch.setattr(audiotok.codec, "GraphCache", lambda fn: GraphCache(fn, capture=capture))
    waves = [golden[k] for k in signals]
    eager_codes = codec.encode(waves)
    eager_audio = codec.decode(eager_codes)
    monkeypatch.setattr(codec, "graphs", {})
    codes = codec.encode(waves)
    assert torch.equal(codes.tokens, eager_codes.tokens)
    torch.testing.assert_close(codec.decode(codes), eager_audio, rtol=0, atol=SAME_MODEL)
    assert sorted(codec.graphs) == kinds
    assert len(capture.captured) == 2
