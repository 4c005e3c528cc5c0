"""Memory allocators on the CPU: offline decode and engine steps of the full-size S2 Pro
configuration (random weights) under glibc's malloc as it comes, glibc tuned by environment,
jemalloc and tcmalloc (preloaded; Debian packages libjemalloc2, libtcmalloc-minimal4).

    python benchmarks/system/allocators.py --threads 2 --rounds 2

Each round runs `serve_engine.py` once per allocator, in turn (so machine noise hits every
allocator alike), and reads its medians: offline decode ms per frame and ms per stream-frame
of 1-frame pushes at --streams. Prints the median over rounds per allocator, with the peak
resident memory of its processes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser

LIBS = Path("/usr/lib/x86_64-linux-gnu")
NO_TRIM = str(2**40)
ALLOCATORS = {
    "glibc": {},
    "glibc, no trim": {"MALLOC_TRIM_THRESHOLD_": NO_TRIM},
    "glibc, 32 MB mmap threshold, no trim": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                                             "MALLOC_TRIM_THRESHOLD_": NO_TRIM},
    "jemalloc": {"LD_PRELOAD": str(LIBS / "libjemalloc.so.2")},
    "tcmalloc": {"LD_PRELOAD": str(LIBS / "libtcmalloc_minimal.so.4")},
}


def run_once(env_extra: dict, args, out: Path) -> tuple[dict, float]:
    """serve_engine.py's float32 medians under this allocator, and the peak RSS in MB."""
    engine = Path(__file__).resolve().parents[1] / "serving" / "serve_engine.py"
    cmd = [sys.executable, str(engine), "--dtypes", "float32", "--threads", str(args.threads),
           "--streams", args.streams,
           "--repeats", str(args.repeats), "--workdir", str(args.workdir), "--json", str(out)]
    proc = subprocess.Popen(cmd, env={**os.environ, **env_extra}, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"serve_engine.py failed under {env_extra}")
    return json.loads(out.read_text())["float32"]["ms"], usage.ru_maxrss / 1024


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--streams", default="1,4", help="concurrent 1-frame streams per step")
    args = p.parse_args()
    chosen = {}
    for name, env in ALLOCATORS.items():
        lib = env.get("LD_PRELOAD")
        if lib and not Path(lib).exists():
            print(f"{name}: {lib} not installed, skipped")
            continue
        chosen[name] = env
    runs: dict[str, list[tuple[dict, float]]] = {name: [] for name in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, env in chosen.items():
                runs[name].append(run_once(env, args, Path(tmp) / f"{r}.json"))
                print(f"round {r + 1}, {name}: " + ", ".join(
                    f"{k} {v:.1f}" for k, v in runs[name][-1][0].items()), flush=True)
    summary = {}
    for name, results in runs.items():
        keys = results[0][0]
        med = {k: statistics.median(ms[k] for ms, _ in results) for k in keys}
        rss = max(mb for _, mb in results)
        summary[name] = {"ms": med, "peak_rss_mb": rss}
        cells = ", ".join(f"{k.replace('engine_', '')} (streams x frames) {v:.1f} ms "
                          f"({v / med['offline']:.2f}x)" for k, v in med.items()
                          if k != "offline")
        print(f"{name}: offline {med['offline']:.1f} ms/frame, {cells}, peak RSS {rss:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
