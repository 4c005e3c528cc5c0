"""Copies of a model lent to offline calls that stream long inputs in pieces (nn/streaming.py
StreamCopies): made once and reused, one per concurrent call, never lent while streaming, and
dropped after a failed call."""

import threading

import pytest
import torch

from audiotok.nn import streaming as streaming_module
from audiotok.nn.streaming import StreamCopies
from tests.server.schedules import random_tokens


def test_long_decodes_reuse_one_copy_and_threads_get_their_own(s2_codec, monkeypatch):
    made = []
    real = streaming_module.stream_copy
    monkeypatch.setattr(streaming_module, "stream_copy",
                        lambda m: made.append(1) or real(m))
    tokens = random_tokens(s2_codec, 3 * s2_codec.streaming.pieces + 5, 0)[None]
    want = s2_codec.decode(tokens)
    assert len(made) <= 1  # (none when an earlier test left a copy to reuse)
    before = len(made)
    assert torch.equal(s2_codec.decode(tokens), want)
    assert len(made) == before
    out = [None] * 3

    def decode(i):
        out[i] = s2_codec.decode(tokens)

    threads = [threading.Thread(target=decode, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(o, want) for o in out)


def test_a_copy_is_lent_to_one_call_at_a_time_and_dropped_after_an_error():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model.register_buffer("scale", torch.ones(2))
    copies = StreamCopies(model, keep=2)
    with copies.streamed() as a, copies.streamed() as b:
        assert a is not b and a[0].weight is model[0].weight  # weights shared
        assert a.scale is model.scale
    with copies.streamed() as c:
        assert c in (a, b)
    with pytest.raises(RuntimeError), copies.streamed() as d:
        raise RuntimeError("a step failed")
    assert d not in copies._free and len(copies._free) == 1
    model.to(torch.float64)  # new buffers (the parameters keep their objects)
    with copies.streamed() as e:
        assert e not in (a, b) and e.scale is model.scale and e.scale.dtype == torch.float64
    assert copies._free == [e]
