"""Time to serve: how soon `audiotok serve` answers /healthz and /readyz, and its warm-up per model.

    python benchmarks/serving/serve_ready.py                       # the two tiny test models
    python benchmarks/serving/serve_ready.py --model full-s2   # full-size S2 Pro, random
    python benchmarks/serving/serve_ready.py --rounds 3 --json ready.json

Starts the server as a subprocess (`--port 0`) per round and polls it every 10 ms: seconds from
the process's start to the listening line, to /healthz 200 and to /readyz 200 (every model warmed
up); and per model, from /readyz, the warm-up's shapes, compute seconds, and when its first
phase (batch 1) and all of it were done. Medians over the rounds.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser

TINY = [str(ROOT / "tests/data/s2_tiny/codec.pth"), f"xc={ROOT / 'tests/data/xcodec2_tiny/hf'}"]


def get(base: str, path: str) -> tuple[int, dict | None]:
    try:
        with urllib.request.urlopen(f"http://{base}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


def one_round(models: list[str], args) -> dict:
    cmd = [sys.executable, "-m", "audiotok", "serve", "--port", "0", "--threads",
           str(args.threads), "--dtype", args.dtype]
    for m in models:
        cmd += ["-m", m]
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = None
        for line in p.stdout:  # "audiotok: serving ... on http://127.0.0.1:PORT (...)"
            if m := re.search(r"on http://([\d.]+:\d+)", line):
                base = m.group(1)
                break
        if base is None:
            raise RuntimeError(f"the server did not start: {p.wait()}")
        # keep reading its log (one line per request), so that a full pipe never blocks it
        threading.Thread(target=p.stdout.read, daemon=True).start()
        out = {"listening_s": time.monotonic() - start}
        while get(base, "/healthz")[0] != 200:
            time.sleep(0.01)
        out["healthz_s"] = time.monotonic() - start
        deadline = start + args.max_wait
        while (r := get(base, "/readyz"))[0] != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not ready after {args.max_wait} s: {r}")
            time.sleep(0.01)
        out["readyz_s"] = time.monotonic() - start
        out["models"] = r[1]["warmup"]
        return out
    finally:
        p.terminate()
        p.wait(timeout=60)


def main() -> None:
    p = parser(__doc__)
    p.set_defaults(threads=2, repeats=1)
    p.add_argument("--model", action="append",
                   help="a model to serve (repeat); full-s2: the full-size S2 configuration with "
                        "random weights; default: the two tiny test models")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-wait", type=float, default=1800.0)
    args = p.parse_args()
    models = args.model or TINY
    if "full-s2" in models:
        from models import random_weights

        models = [f"full_s2={random_weights('s2', args.workdir)}" if m == "full-s2" else m
                  for m in models]
    rounds = [one_round(models, args) for _ in range(args.rounds)]
    med = {k: statistics.median(r[k] for r in rounds)
           for k in ("listening_s", "healthz_s", "readyz_s")}
    print(f"{args.rounds} rounds, medians: listening {med['listening_s']:.2f} s, /healthz 200 "
          f"{med['healthz_s']:.2f} s, /readyz 200 {med['readyz_s']:.2f} s after the process "
          f"started")
    for name in rounds[0]["models"]:
        ms = [r["models"][name] for r in rounds]
        print(f"  {name}: {ms[0]['shapes']} shapes, compute "
              f"{statistics.median(m['seconds'] for m in ms):.2f} s, batch 1 after "
              f"{statistics.median(m['first_phase_after_s'] for m in ms):.2f} s, complete after "
              f"{statistics.median(m['complete_after_s'] for m in ms):.2f} s (from its start)")
    if args.json:
        args.json.write_text(json.dumps({"medians": med, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
