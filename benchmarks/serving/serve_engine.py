"""Serving engine, per-step efficiency: the cost of a stream's frame in an engine step next to
offline decode's cost per frame, on the full-size S2 Pro configuration (random weights) or any
model given with --model.

    python benchmarks/serving/serve_engine.py --threads 2 --dtypes float32,bfloat16 --streams 1,4,8
    python benchmarks/serving/serve_engine.py --model <snac folder> --dtypes float32 --push 1,2,4

For each dtype, in interleaved rounds (so machine noise hits every configuration alike):
offline decode of --frames frames (ms per frame), and engine steps where N streams each push
F frames (ms per stream-frame), for every N in --streams and F in --push. Prints the medians and
their ratios to offline; a frame period over a cost is how many real-time streams that step
shape can carry on these cores. With --breakdown (S2), also where one stream's 1-frame push
goes (median ms per stage, forward hooks).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser
from models import random_tokens

import audiotok
from audiotok.server import Engine, EngineSettings


def offline_ms_per_frame(codec, frames: int) -> float:
    tokens = random_tokens(codec, frames, 0)[None]
    t = time.perf_counter()
    codec.decode(tokens)
    return (time.perf_counter() - t) * 1e3 / frames


def engine_ms_per_stream_frame(codec, streams: int, steps: int, push: int = 1,
                               warmup: int = 6) -> float:
    """Median over `steps` engine steps of N streams pushing `push` frames each (after
    `warmup` steps, past a stateful stream's start)."""
    engine = Engine({"m": codec}, EngineSettings(max_streams=streams, max_batch=streams,
                                                 max_step_frames=push), start=False)
    opened = [engine.open_decode_stream("m") for _ in range(streams)]
    tokens = [random_tokens(codec, (warmup + steps) * push, i + 1) for i in range(streams)]
    times = []
    for f in range(warmup + steps):
        for s, tok in zip(opened, tokens, strict=True):
            s.push(tok[:, f * push: (f + 1) * push])
        t = time.perf_counter()
        engine.step()
        if f >= warmup:
            times.append(time.perf_counter() - t)
        for s in opened:
            s.available()
    for s in opened:
        s.abort()
    engine.close()
    return statistics.median(times) * 1e3 / streams / push


def push_breakdown(codec, steps: int, warmup: int = 3) -> dict[str, float]:
    """Median ms per stage of one stream's 1-frame pushes: the post-quantizer transformer, the
    upsampler, the decoder and its first block, and the whole step."""
    engine = Engine({"m": codec}, EngineSettings(max_streams=1, max_batch=1), start=False)
    model = engine.models["m"].runners["decode"].streamer.model  # the copy the steps run
    stages = {"transformer": model.quantizer.post_module, "upsample": model.quantizer.upsample,
              "decoder": model.decoder, "decoder block 1": model.decoder.model[1]}
    times: dict[str, list[float]] = defaultdict(list)
    for name, module in stages.items():
        module.register_forward_pre_hook(lambda m, a: setattr(m, "_t0", time.perf_counter()))
        module.register_forward_hook(
            lambda m, a, y, name=name: times[name].append(time.perf_counter() - m._t0))
    stream = engine.open_decode_stream("m")
    tokens = random_tokens(codec, warmup + steps, 1)
    for f in range(warmup + steps):
        stream.push(tokens[:, f: f + 1])
        t = time.perf_counter()
        engine.step()
        times["step"].append(time.perf_counter() - t)
        stream.read()
    stream.abort()
    engine.close()
    return {k: statistics.median(v[warmup:]) * 1e3 for k, v in times.items()}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--streams", default="1,4,8", help="concurrent streams per step")
    p.add_argument("--push", default="1", help="frames each stream pushes per step")
    p.add_argument("--frames", type=int, default=64, help="offline decode length")
    p.add_argument("--steps", type=int, default=8, help="timed engine steps per round")
    p.add_argument("--model", help="S2 checkpoint (default: random full-size weights)")
    p.add_argument("--breakdown", action="store_true", help="time the stages of a push")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        from models import random_weights

        args.model = str(random_weights("s2", args.workdir))
    streams = [int(n) for n in args.streams.split(",")]
    shapes = [(n, int(f)) for n in streams for f in args.push.split(",")]
    results = {}
    for dtype in args.dtypes.split(","):
        codec = audiotok.load(args.model, dtype=getattr(torch, dtype))
        rounds: dict[str, list[float]] = {"offline": [],
                                          **{f"engine_{n}x{f}": [] for n, f in shapes}}
        offline_ms_per_frame(codec, args.frames)  # warm-up
        for _ in range(args.repeats):
            rounds["offline"].append(offline_ms_per_frame(codec, args.frames))
            for n, f in shapes:
                rounds[f"engine_{n}x{f}"].append(
                    engine_ms_per_stream_frame(codec, n, args.steps, f))
        med = {k: statistics.median(v) for k, v in rounds.items()}
        results[dtype] = {"ms": med, "ratio_to_offline":
                          {k: v / med["offline"] for k, v in med.items()}, "rounds": rounds}
        print(f"{dtype}: offline decode {med['offline']:.1f} ms/frame")
        period = 1e3 * codec.samples_per_frame / codec.sample_rate
        for n, f in shapes:
            m = med[f"engine_{n}x{f}"]
            print(f"  {n:3d} streams x {f}-frame pushes: {m:.1f} ms per stream-frame "
                  f"({m / med['offline']:.2f}x offline; {period / m:.1f} real-time streams)")
        if args.breakdown:
            parts = push_breakdown(codec, args.steps * args.repeats)
            results[dtype]["push_breakdown_ms"] = parts
            print("  one stream's 1-frame push, ms: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
