"""An item's codes and audio never depend on the batch it shares a call with, for every
registered family: offline (ragged batches, in two orders, with shorter and longer neighbours)
and streamed (streams of different ages and push sizes whose rows the engine runs in one call),
each against the item alone. Codes equal exactly; audio within SAME_MODEL (one model, the same
inputs: only the batch differs).

Each family's test folder provides `tiny.py`: `checkpoints(tmp_path_factory) -> {variant:
loadable path}`, small models on random weights; a family without one fails here."""

import importlib

import numpy as np
import pytest
import torch

import audiotok
from audiotok.models import registry
from audiotok.server import Engine, EngineSettings
from tests.bounds import SAME_MODEL

FAMILIES = list(registry.FAMILIES.values())
# (frames, extra samples past them) of the three items: a partial frame, whole frames, a
# half frame
SHAPES = ((3, 17), (7, 0), (5, 0.5))


def tiny_codecs(family, factory) -> dict:
    folder = family.package.rsplit(".", 1)[1]
    module = importlib.import_module(f"tests.models.{folder}.tiny")
    return {name: audiotok.load(path) for name, path in module.checkpoints(factory).items()}


@pytest.fixture(scope="module")
def codecs(tmp_path_factory):
    built = {}

    def get(family):
        if family.name not in built:
            built[family.name] = tiny_codecs(family, tmp_path_factory)
        return built[family.name]

    return get


def items(codec, seed: int) -> list[torch.Tensor]:
    """Three items [C, n] of noise at speech level, the lengths of SHAPES."""
    g = torch.Generator().manual_seed(seed)
    spf = codec.input_samples_per_frame
    lengths = [frames * spf + int(extra if extra >= 1 else extra * spf)
               for frames, extra in SHAPES]
    for i, (frames, _) in enumerate(SHAPES):  # (a codec whose first frame needs more samples)
        while codec.num_frames(lengths[i]) < frames:
            lengths[i] += spf
    return [0.1 * torch.randn(codec.channels, n, generator=g) for n in lengths]


def assert_codes_equal(got: audiotok.Codes, i: int, alone: audiotok.Codes) -> None:
    n = int(alone.lengths[0])
    assert int(got.lengths[i]) == n
    torch.testing.assert_close(got.tokens[i, :, :n], alone.tokens[0, :, :n], rtol=0, atol=0)
    if alone.scales is not None:
        k = alone.scales.shape[-1]
        torch.testing.assert_close(got.scales[i, :k], alone.scales[0], rtol=0, atol=0)
    if alone.globals is not None:
        torch.testing.assert_close(got.globals[i], alone.globals[0], rtol=0, atol=0)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_offline_items_equal_their_results_alone(family, codecs):
    for codec in codecs(family).values():
        xs = items(codec, 0)
        alone = [codec.encode(x) for x in xs]
        decodes = codec.decode_refusal is None  # (an encode-only codec: codes alone)
        heard = [codec.decode(c) for c in alone] if decodes else []
        for order in ((0, 1, 2), (2, 0, 1)):
            batch = codec.encode([xs[i] for i in order])
            for j, i in enumerate(order):
                assert_codes_equal(batch, j, alone[i])
            if not decodes:
                continue
            audio = codec.decode(batch)
            for j, i in enumerate(order):
                n = heard[i].shape[-1]
                assert (audio[j, :, :n] - heard[i][0]).abs().max() <= SAME_MODEL
                assert not audio[j, :, n:].any()  # zeros past the item


def run_streams(codec, kind: str, inputs: list, opens: list[int], pushes: list[int]):
    """Streams of `kind` through one engine, stream i opening at step opens[i] and pushing
    pushes[i] units (frames or samples) a step; each stream's outputs concatenated."""
    engine = Engine({"m": codec}, EngineSettings(max_backlog_seconds=1e6), start=False)
    streamer = engine.models["m"].runners[kind].streamer
    run_step, widest = streamer.step, [0]

    def counted(rows, *args):
        widest[0] = max(widest[0], len(rows))
        return run_step(rows, *args)

    streamer.step = counted
    opener = engine.open_decode_stream if kind == "decode" else engine.open_encode_stream
    streams, sent = [None] * len(inputs), [0] * len(inputs)
    outs = [[] for _ in inputs]
    step = 0
    while any(s is None or s.state in ("open", "finishing") for s in streams):
        for i, x in enumerate(inputs):
            if streams[i] is None and step >= opens[i]:
                # (a decode stream of codes with utterance tokens opens with them)
                streams[i] = opener("m", **({"globals": x[2]} if kind == "decode" and
                                            x[2] is not None else {}))
            s = streams[i]
            if s is None or s.state != "open":
                continue
            if kind == "decode":  # (tokens [K, T], the segments' scales, utterance tokens)
                tokens, scales, _ = x
                s.push(tokens[:, sent[i]: sent[i] + pushes[i]], None if sent[i] else scales)
            else:  # audio [C, n] or [n]
                tokens = x
                s.push(x[..., sent[i]: sent[i] + pushes[i]])
            sent[i] += pushes[i]
            if sent[i] >= tokens.shape[-1]:
                s.finish()
        engine.step()
        for i, s in enumerate(streams):
            if s is not None:
                outs[i] += s.available()
        step += 1
        assert step < 2000
    assert engine.rows_in_use() == 0
    assert widest[0] == len(inputs)  # (together: some step ran every stream's row)
    return [np.concatenate(o, axis=-1) for o in outs]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_streams_equal_their_results_alone(family, codecs):
    """Two streams of different ages in one engine: each one's output equals the same stream's
    alone (and, where its kind is exact, the offline result)."""
    for codec in codecs(family).values():
        xs = items(codec, 1)[1:]
        spec = codec.streaming
        opens, frames = [0, 2], [2, 3]
        if spec.decode is not None and not codec.stream_refusal("decode"):
            codes = [codec.encode(x) for x in xs]
            inputs = [(c.tokens[0], None if c.scales is None else c.scales[0].numpy(),
                       None if c.globals is None else c.globals[0]) for c in codes]
            together = run_streams(codec, "decode", inputs, opens, frames)
            for i, x in enumerate(inputs):
                alone = run_streams(codec, "decode", [x], [0], [frames[i]])[0]
                assert together[i].shape == alone.shape and alone.shape[-1] > 0
                assert np.abs(together[i] - alone).max() <= SAME_MODEL
        if spec.encode is not None and not codec.stream_refusal("encode"):
            spf = codec.input_samples_per_frame
            audio = [x.numpy() if codec.channels > 1 else x[0].numpy() for x in xs]
            samples = [2 * spf + 5, 3 * spf - 7]
            together = run_streams(codec, "encode", audio, opens, samples)
            for i, x in enumerate(audio):
                want = codec.encode(torch.from_numpy(x)).tokens[0].numpy()
                np.testing.assert_array_equal(together[i], want)
