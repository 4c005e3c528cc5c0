"""Transparent huge pages for PyTorch's CPU allocator (THP_MEM_ALLOC_ENABLE=1, which the
`audiotok` command sets; cli/_allocator.py): long encodes and decodes with it off and on, each
setting in a fresh process (PyTorch reads it once), the two alternating for --rounds rounds;
the median of the rounds' times (each the best of --repeats after a warm-up) and on / off.

    python benchmarks/system/huge_pages.py --threads 2 --seconds 60 --rounds 3
    python benchmarks/system/huge_pages.py --model random-mimi --model PATH  # and others

random-mimi (the default): full-size Mimi with random weights (models.random_mimi, nothing
to download). The kernel must allow it: /sys/kernel/mm/transparent_hugepage/enabled says
"madvise" or "always" ("never": both settings run alike).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py


def child(models: list[str], seconds: float, repeats: int, threads: int) -> dict:
    import torch
    from common import speech

    import audiotok

    torch.set_num_threads(threads)
    out = {}
    for model in models:
        if model == "random-mimi":
            from models import random_mimi

            codec = random_mimi()
        else:
            codec = audiotok.load(Path(model))
        x = torch.from_numpy(speech(seconds, codec.sample_rate)).float()[None]
        codes = codec.encode(x, codec.sample_rate)
        codec.decode(codes)  # warm-up
        times = {"encode": [], "decode": []}
        for _ in range(repeats):
            t = time.perf_counter()
            codes = codec.encode(x, codec.sample_rate)
            times["encode"].append(time.perf_counter() - t)
            t = time.perf_counter()
            codec.decode(codes)
            times["decode"].append(time.perf_counter() - t)
        out[model] = {op: min(v) for op, v in times.items()}
    return out


def arguments(doc: str) -> argparse.Namespace:
    """The options of the benchmarks that compare process settings (this one, malloc_heap.py)."""
    from common import parser

    p = parser(doc)
    p.add_argument("--model", action="append", default=[],
                   help="a checkpoint, or random-mimi (repeatable; default random-mimi)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.model = args.model or ["random-mimi"]
    return args


def alternate(script, args, envs: dict[str, dict]) -> dict[str, list[dict]]:
    """`script --child` with args' options once per setting in its environment (`envs`), the
    settings in turn for args.rounds rounds; the JSON each run printed last, by setting."""
    command = [sys.executable, str(script), "--child", "--seconds", str(args.seconds),
               "--repeats", str(args.repeats), "--threads", str(args.threads)]
    for model in args.model:
        command += ["--model", model]
    runs: dict[str, list[dict]] = {setting: [] for setting in envs}
    for _ in range(args.rounds):
        for setting, env in envs.items():
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            runs[setting].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def main() -> None:
    args = arguments(__doc__)
    if args.child:
        print(json.dumps(child(args.model, args.seconds, args.repeats, args.threads)))
        return
    runs = alternate(__file__, args, {s: {**os.environ, "THP_MEM_ALLOC_ENABLE": s}
                                      for s in ("0", "1")})
    rows = []
    for model in runs["0"][0]:
        for op in ("encode", "decode"):
            off, on = (statistics.median(r[model][op] for r in runs[s]) for s in ("0", "1"))
            rows.append({"model": model, "op": op, "off_s": off, "on_s": on})
            print(f"{args.seconds:5.0f} s {op} {model}: off {off:.2f} s, on {on:.2f} s "
                  f"({on / off:.2f}x the time)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
