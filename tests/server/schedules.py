"""Decode schedules for engine tests: streams open at given steps and push given sizes at given
paces while the test drives the engine step by step; every stream's audio must equal the
offline decode of its tokens."""

import numpy as np
import torch

TOL = 1e-5


def random_tokens(codec, frames: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n, (frames,), generator=g)
                        for n in codec.codebook_sizes])


def run_decode_schedule(engine, codec, streams: list[dict], seed: int, name: str = "s2") -> None:
    """streams: dicts of `frames`, `pushes` (push sizes, cycled), `opens` (the step at which it
    opens) and `pace` (it pushes every `pace` steps); pushes are numpy or torch at random. Steps
    the engine (model `name`) until every stream is done, then checks each against offline decode
    and that every slot was released."""
    rng = np.random.default_rng(seed)
    todo = [dict(spec, tokens=random_tokens(codec, spec["frames"], seed + i), sent=0,
                 stream=None, out=[]) for i, spec in enumerate(streams)]
    step = 0
    while any(t["stream"] is None or t["stream"].state in ("open", "finishing") for t in todo):
        for t in todo:
            if t["stream"] is None and step >= t["opens"]:
                t["stream"] = engine.open_decode_stream(name)
            s = t["stream"]
            if s is None or s.state != "open" or step % t["pace"]:
                continue
            size = t["pushes"][len(t["out"]) % len(t["pushes"])]
            chunk = t["tokens"][:, t["sent"]: t["sent"] + size]
            s.push(chunk.numpy() if rng.random() < 0.5 else chunk)
            t["sent"] += chunk.shape[1]
            if t["sent"] >= t["frames"]:
                s.finish()
        engine.step()
        for t in todo:
            if t["stream"] is not None:
                t["out"] += t["stream"].available()
        step += 1
        assert step < 1000
    for t in todo:
        assert t["stream"].state == "done"
        assert t["stream"].read() is None
        got = np.concatenate(t["out"])
        want = codec.decode(t["tokens"])[0, 0].numpy()
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= TOL
    assert engine.rows_in_use() == 0


def run_encode_streams(engine, codec, audio: list[np.ndarray], rng, name: str = "s2",
                       push_chance: float = 1.0) -> None:
    """Encode streams of `audio` (one per array) pushed in ragged pieces of 1..9000 samples
    (each stream pushing in a step with `push_chance`), stepping the engine until all are
    done; each stream's tokens must equal the offline encode of its audio."""
    streams = [engine.open_encode_stream(name) for _ in audio]
    sent, outs = [0] * len(audio), [[] for _ in audio]
    while any(s.state in ("open", "finishing") for s in streams):
        for i, s in enumerate(streams):
            if s.state == "open" and rng.random() < push_chance:
                n = int(rng.integers(1, 9000))
                s.push(audio[i][sent[i]: sent[i] + n])
                sent[i] += n
                if sent[i] >= audio[i].size:
                    s.finish()
        engine.step()
        for i, s in enumerate(streams):
            outs[i] += s.available()
    for i, x in enumerate(audio):
        want = codec.encode(torch.from_numpy(x)).tokens[0].numpy()
        np.testing.assert_array_equal(np.concatenate(outs[i], axis=1), want)
