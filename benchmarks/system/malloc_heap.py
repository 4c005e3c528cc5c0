"""glibc's malloc as the test suite sets it (tests/conftest.py: blocks under 1 GB from the heap,
up to 2 GB of freed heap kept) against glibc as it comes: long encodes and decodes,
each setting in a fresh process (glibc reads GLIBC_TUNABLES at start), the two alternating for
--rounds rounds; the median of the rounds' times (each the best of --repeats after a warm-up),
heap / default, and each setting's largest peak resident memory. Both run with transparent huge
pages on, as the `audiotok` command sets them (huge_pages.py); the command leaves malloc as it
comes (docs/performance.md#huge-pages).

    python benchmarks/system/malloc_heap.py --threads 2 --seconds 30 --rounds 3 \\
        --model random-mimi --model PATH
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
sys.path.insert(0, str(Path(__file__).resolve().parent))
from huge_pages import alternate, arguments, child  # noqa: E402

SETTINGS = ("default", "heap")
TUNABLES = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=2147483647"


def main() -> None:
    args = arguments(__doc__)
    if args.child:
        out = child(args.model, args.seconds, args.repeats, args.threads)
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(out))
        return
    base = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    base["THP_MEM_ALLOC_ENABLE"] = "1"
    runs = alternate(__file__, args, {"default": base,
                                      "heap": {**base, "GLIBC_TUNABLES": TUNABLES}})
    rows = []
    for model in args.model:
        for op in ("encode", "decode"):
            default, heap = (statistics.median(r[model][op] for r in runs[s]) for s in SETTINGS)
            rows.append({"model": model, "op": op, "seconds": args.seconds,
                         "default_s": default, "heap_s": heap})
            print(f"{args.seconds:5.0f} s {op} {model}: default {default:.2f} s, heap "
                  f"{heap:.2f} s ({heap / default:.2f}x the time)")
    peaks = {s: max(r["peak_rss_mb"] for r in runs[s]) for s in SETTINGS}
    print(f"peak resident memory: default {peaks['default']:.0f} MB, heap {peaks['heap']:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "peak_rss_mb": peaks}, indent=1))


if __name__ == "__main__":
    main()
