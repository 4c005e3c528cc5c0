"""Serving engine, per-step efficiency: the cost of a stream's frame in an engine step next to
offline decode's cost per frame, on the full-size S2 Pro configuration (random weights).

    python benchmarks/serve_engine.py --threads 2 --dtypes float32,bfloat16 --streams 1,4,8

For each dtype, in interleaved rounds (so machine noise hits every configuration alike):
offline decode of --frames frames (ms per frame), and engine steps where N streams each push
one frame (ms per stream-frame). Prints the medians and their ratios to offline.
"""

from __future__ import annotations

import json
import statistics
import time

import torch
from common import parser

import audiotok
from audiotok.server import Engine, EngineSettings


def tokens_for(codec, frames: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n, (frames,), generator=g)
                        for n in codec.codebook_sizes])


def offline_ms_per_frame(codec, frames: int) -> float:
    tokens = tokens_for(codec, frames, 0)[None]
    t = time.perf_counter()
    codec.decode(tokens)
    return (time.perf_counter() - t) * 1e3 / frames


def engine_ms_per_stream_frame(codec, streams: int, steps: int, warmup: int = 3) -> float:
    """Median over `steps` engine steps of N streams pushing one frame each."""
    engine = Engine({"m": codec}, EngineSettings(max_streams=streams, max_batch=streams),
                    start=False)
    opened = [engine.open_decode_stream("m") for _ in range(streams)]
    tokens = [tokens_for(codec, warmup + steps, i + 1) for i in range(streams)]
    times = []
    for f in range(warmup + steps):
        for s, tok in zip(opened, tokens, strict=True):
            s.push(tok[:, f: f + 1])
        t = time.perf_counter()
        engine.step()
        if f >= warmup:
            times.append(time.perf_counter() - t)
        for s in opened:
            s.read()
    for s in opened:
        s.abort()
    engine.close()
    return statistics.median(times) * 1e3 / streams


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--streams", default="1,4,8", help="concurrent 1-frame streams per step")
    p.add_argument("--frames", type=int, default=64, help="offline decode length")
    p.add_argument("--steps", type=int, default=8, help="timed engine steps per round")
    p.add_argument("--model", help="S2 checkpoint (default: random full-size weights)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        from compare import weights

        args.model = str(weights("s2", args.workdir))
    streams = [int(n) for n in args.streams.split(",")]
    results = {}
    for dtype in args.dtypes.split(","):
        codec = audiotok.load(args.model, dtype=getattr(torch, dtype))
        rounds: dict[str, list[float]] = {"offline": [], **{f"engine_{n}": [] for n in streams}}
        offline_ms_per_frame(codec, args.frames)  # warm-up
        for _ in range(args.repeats):
            rounds["offline"].append(offline_ms_per_frame(codec, args.frames))
            for n in streams:
                rounds[f"engine_{n}"].append(engine_ms_per_stream_frame(codec, n, args.steps))
        med = {k: statistics.median(v) for k, v in rounds.items()}
        results[dtype] = {"ms": med, "ratio_to_offline":
                          {k: v / med["offline"] for k, v in med.items()}, "rounds": rounds}
        print(f"{dtype}: offline decode {med['offline']:.1f} ms/frame")
        for n in streams:
            m = med[f"engine_{n}"]
            print(f"  {n:3d} streams x 1-frame pushes: {m:.1f} ms per stream-frame "
                  f"({m / med['offline']:.2f}x offline)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
