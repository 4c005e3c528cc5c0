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
    assert engine.table_in_use() == 0
