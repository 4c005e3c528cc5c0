"""Full-size S2 Pro codec with random weights: load time, peak RSS, encode/decode real-time factor.

    python benchmarks/s2_cpu.py --seconds 10 --threads 2 --repeats 3

Random weights in the released codec.pth layout are written once to --workdir (1.6 GB). Timings
are medians; the real-time factor is processing time / audio duration (below 1 is faster than
real time). Peak RSS is the process high-water mark after each stage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from common import median_time, parser, peak_rss_mb, speech


def make_weights(path: Path) -> None:
    from audiotok.models.s2.config import S2_PRO
    from audiotok.models.s2.model import S2Model
    from audiotok.models.s2.weights import to_fish_speech

    torch.manual_seed(0)
    sd = to_fish_speech(S2Model(S2_PRO).state_dict())
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(sd, path)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--make-weights", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.make_weights:
        make_weights(args.make_weights)
        return
    weights = args.workdir / "s2-pro-random" / "codec.pth"
    if not weights.exists():  # in a child process, so its memory does not count here
        subprocess.run([sys.executable, __file__, "--make-weights", str(weights)], check=True)
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
