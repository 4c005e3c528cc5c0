"""Which thread runs a codec's calls: one stream's 1-frame decode push timed from the thread that
loaded the model, from a second thread while the loading thread lives (its OpenMP threads stay),
with 1 torch thread, and from a second thread after the loading thread has ended (what
`audiotok serve` does: docs/serving.md).

    python benchmarks/serving/loader_thread.py --model /tmp/audiotok-bench/snac_24khz_full \
        --threads 2 --repeats 5

Each case runs in its own process (a thread's OpenMP pool outlives it); medians of --pushes
pushes after --warmup, over --repeats processes, interleaved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser  # noqa: F401  (ROOT puts src/ on the path)

CASES = ("loading thread", "another thread", "1 thread", "after the loader ended")


def push_ms(codec, pushes: int, warmup: int) -> float:
    """Median ms of a 1-frame push to a fresh decode stream."""
    codes = torch.randint(0, min(codec.codebook_sizes), (1, codec.num_codebooks, 1))
    times = []
    with torch.inference_mode(), codec.stream_decoder() as dec:
        for i in range(warmup + pushes):
            t = time.perf_counter()
            dec.push(codes)
            if i >= warmup:
                times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def child(model: str, case: str, threads: int, pushes: int, warmup: int) -> float:
    import audiotok

    torch.set_num_threads(1 if case == "1 thread" else threads)
    if case == "after the loader ended":
        box = []
        t = threading.Thread(target=lambda: box.append(audiotok.load(model)))
        t.start()
        t.join()
        codec = box[0]
    else:
        codec = audiotok.load(model)
        push_ms(codec, 1, 1)  # the loading thread runs a multi-threaded call
    if case == "loading thread":
        return push_ms(codec, pushes, warmup)
    out = []
    worker = threading.Thread(target=lambda: out.append(push_ms(codec, pushes, warmup)))
    worker.start()
    worker.join()
    return out[0]


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--pushes", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--case", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.case:
        print(child(args.model, args.case, args.threads, args.pushes, args.warmup))
        return
    from audiotok.nn.kernels.cpu import this_cpu

    runs: dict[str, list[float]] = {c: [] for c in CASES}
    for _ in range(args.repeats):
        for case in CASES:
            r = subprocess.run([sys.executable, __file__, "--model", args.model, "--case", case,
                                "--threads", str(args.threads), "--pushes", str(args.pushes),
                                "--warmup", str(args.warmup)], capture_output=True, text=True,
                               check=True)
            runs[case].append(float(r.stdout.strip().splitlines()[-1]))
    med = {c: statistics.median(v) for c, v in runs.items()}
    print(this_cpu().describe(), f"{args.threads} threads, {Path(args.model).name}")
    for case in CASES:
        print(f"{case:24s} {med[case]:7.1f} ms per 1-frame push")
    if args.json:
        args.json.write_text(json.dumps({"cpu": this_cpu().describe(), "threads": args.threads,
                                         "model": Path(args.model).name, "median_ms": med,
                                         "runs_ms": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
