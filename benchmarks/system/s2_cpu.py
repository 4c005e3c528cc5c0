"""Full-size S2 Pro codec with random weights: load time, peak RSS, encode/decode real-time factor.

    python benchmarks/system/s2_cpu.py --seconds 10 --threads 2 --repeats 3

Random weights in the released codec.pth layout are written once to --workdir (1.6 GB). Timings
are medians; the real-time factor is processing time / audio duration (below 1 is faster than
real time). Peak RSS is the process high-water mark after each stage.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import median_time, parser, peak_rss_mb, speech
from models import random_weights


def main() -> None:
    p = parser(__doc__)
    args = p.parse_args()
    weights = random_weights("s2", args.workdir)  # (made in a child process: not counted here)
    torch.set_num_threads(args.threads)
    import audiotok

    rss0 = peak_rss_mb()
    t = time.perf_counter()
    codec = audiotok.load(weights)
    load_s = time.perf_counter() - t
    rss_load = peak_rss_mb()
    x = speech(args.seconds, codec.sample_rate)
    enc_s, codes = median_time(lambda: codec.encode(x), args.repeats)
    rss_enc = peak_rss_mb()
    dec_s, _ = median_time(lambda: codec.decode(codes), args.repeats)
    rss_dec = peak_rss_mb()
    result = {
        "config": "s2-pro (random weights)", "audio_seconds": args.seconds,
        "threads": args.threads, "repeats": args.repeats, "dtype": "float32",
        "torch": torch.__version__, "load_s": round(load_s, 2),
        "encode_s": round(enc_s, 3), "encode_rtf": round(enc_s / args.seconds, 3),
        "decode_s": round(dec_s, 3), "decode_rtf": round(dec_s / args.seconds, 3),
        "peak_rss_mb": {"start": round(rss0), "after_load": round(rss_load),
                        "after_encode": round(rss_enc), "after_decode": round(rss_dec)},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
