"""GPU figures in one short run: encode and decode throughput at batch 1 and 16, eager and with
CUDA graphs, float32 and bfloat16, for both codecs, and the S2 streaming decoder's time per
pushed frame. Full-size models with random weights built on the GPU (no files needed).

    python benchmarks/system/gpu.py --seconds 10 --json gpu.json

Prints a table (audiotok bench's columns; device "cuda+graphs" for graph runs), which shapes
fell back to eager execution and why, and checks that graph runs give the eager tokens.

Then the serving engine on S2 (`--engine-streams`, eager and with CUDA graphs): N streams each
pushing one frame per engine step; per N the median step time, its cost per stream-frame,
whether the N streams run in real time (a step of one frame each within one frame's duration,
46.4 ms), and the first audio of a stream that joins them (its first push to its audio, one
step of N + 1 streams). Streams sustained in real time: the largest such N.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from models import random_tokens

from audiotok import bench
from audiotok.models.s2.codec import S2Codec
from audiotok.models.s2.config import S2_PRO
from audiotok.models.s2.model import S2Model
from audiotok.models.xcodec2.codec import XCodec2Codec
from audiotok.models.xcodec2.config import XCodec2Config
from audiotok.models.xcodec2.model import XCodec2Model
from audiotok.server import Engine, EngineSettings

BUILD = {"s2": (lambda: S2Model(S2_PRO), S2Codec),
         "xcodec2": (lambda: XCodec2Model(XCodec2Config()), XCodec2Codec)}


def engine_level(codec, streams: int, steps: int, warmup: int = 3) -> dict:
    """N streams pushing one frame per engine step (median step ms over `steps`), then a
    stream joining them `steps` times (median ms from its first push to its audio)."""
    engine = Engine({"m": codec}, EngineSettings(max_streams=streams + 1,
                                                 max_batch=streams + 1), start=False)
    opened = [engine.open_decode_stream("m") for _ in range(streams)]
    tokens = random_tokens(codec, 2 * (warmup + steps), 1)
    frame = iter(range(tokens.shape[1]))

    def step(extra=None) -> float:
        f = next(frame)
        for s in opened:
            s.push(tokens[:, f: f + 1])
        if extra is not None:
            extra.push(tokens[:, f: f + 1])
        t = time.perf_counter()
        engine.step()  # the audio is copied to the host: the step has finished on the GPU
        elapsed = time.perf_counter() - t
        for s in opened:
            s.available()
        return elapsed

    times = [step() for _ in range(warmup + steps)][warmup:]
    first = []
    for i in range(warmup + steps):
        new = engine.open_decode_stream("m")
        t = time.perf_counter()
        step(new)
        got = new.available()
        if i >= warmup:
            first.append(time.perf_counter() - t)
        assert got, "the new stream's first frame was not decoded in its first step"
        new.abort()
        engine.step()  # frees its slot (nothing else is waiting)
    for s in opened:
        s.abort()
    engine.close()
    step_ms = statistics.median(times) * 1e3
    return {"streams": streams, "step_ms": step_ms, "ms_per_stream_frame": step_ms / streams,
            "real_time": step_ms <= 1e3 / codec.frame_rate,
            "first_audio_ms": statistics.median(first) * 1e3}


def engine_figures(model, dtypes: list[str], levels: list[int], steps: int) -> list[dict]:
    rows = []
    for dtype_name in dtypes:
        for graphs in (False, True):
            codec = S2Codec(model, device="cuda", dtype=getattr(torch, dtype_name),
                            cuda_graphs=graphs)
            for n in levels:
                row = {"dtype": dtype_name, "graphs": graphs, **engine_level(codec, n, steps)}
                rows.append(row)
                print(f"engine s2 {dtype_name} {'graphs' if graphs else 'eager'}: {n} streams, "
                      f"step {row['step_ms']:.1f} ms ({row['ms_per_stream_frame']:.2f} ms per "
                      f"stream-frame, real time: {row['real_time']}), first audio of a joining "
                      f"stream {row['first_audio_ms']:.1f} ms", flush=True)
            sustained = [r["streams"] for r in rows
                         if r["dtype"] == dtype_name and r["graphs"] == graphs and r["real_time"]]
            print(f"engine s2 {dtype_name} {'graphs' if graphs else 'eager'}: "
                  f"{max(sustained, default=0)} streams sustained in real time", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--codecs", default="s2,xcodec2")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--batches", default="1,16")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engine-streams", default="1,4,16,64,256",
                   help="serving engine levels (S2; empty: skip)")
    p.add_argument("--engine-steps", type=int, default=10, help="timed steps per level")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu.py needs a CUDA device")
    batches = [int(b) for b in args.batches.split(",")]
    rows, fallbacks, checks, engine_rows = [], {}, {}, []
    for name in args.codecs.split(","):
        make_model, codec_class = BUILD[name]
        torch.manual_seed(0)
        t = time.perf_counter()
        with torch.device("cuda"):
            model = make_model()
        print(f"{name}: built in {time.perf_counter() - t:.1f} s", flush=True)
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            tokens = {}
            for graphs in (False, True):
                codec = codec_class(model, device="cuda", dtype=dtype, cuda_graphs=graphs)
                t = time.perf_counter()
                rows += bench.run(codec, [args.seconds], batches, args.repeats,
                                  stream=codec.streaming.decode == "layers" and not graphs)
                x = torch.from_numpy(bench.test_signal(args.seconds, codec.sample_rate, 2))
                tokens[graphs] = codec.encode(x[:, None]).tokens
                label = f"{name} {dtype_name} {'graphs' if graphs else 'eager'}"
                print(f"{label}: {time.perf_counter() - t:.1f} s", flush=True)
                if graphs:
                    fallbacks[label] = {k: dict((str(s), why) for s, why in c.failed.items())
                                        for k, c in codec.graphs.items() if c.failed}
            checks[f"{name} {dtype_name}"] = bool(torch.equal(tokens[False], tokens[True]))
        if name == "s2" and args.engine_streams:
            engine_rows = engine_figures(model, args.dtypes.split(","),
                                         [int(n) for n in args.engine_streams.split(",")],
                                         args.engine_steps)
        del model, codec
        torch.cuda.empty_cache()
    print(bench.table(rows))
    print("graph tokens equal eager tokens:", checks)
    print("eager fallbacks:", json.dumps(fallbacks, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                         "torch": torch.__version__,
                                         "rows": bench.as_dicts(rows), "tokens_equal": checks,
                                         "fallbacks": fallbacks, "engine": engine_rows},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
