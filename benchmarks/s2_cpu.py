"""Full-size S2 Pro codec with random weights: load time, peak RSS, encode/decode real-time factor.

    python benchmarks/s2_cpu.py --seconds 10 --threads 2 --repeats 3

Random weights in the released codec.pth layout are written once to --workdir (1.6 GB). Timings
are medians; the real-time factor is processing time / audio duration (below 1 is faster than
real time). Peak RSS is the process high-water mark after each stage.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def make_weights(path: Path) -> None:
    from audiotok.models.s2.config import S2_PRO
    from audiotok.models.s2.model import S2Model
    from audiotok.models.s2.weights import to_fish_speech

    torch.manual_seed(0)
    sd = to_fish_speech(S2Model(S2_PRO).state_dict())
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(sd, path)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def speech(seconds: float, rate: int) -> np.ndarray:
    from audiotok.audio import read_audio, resample

    x, r = read_audio(ROOT / "examples" / "speech.wav")
    x = resample(x[0], r, rate)
    reps = int(np.ceil(seconds * rate / x.size))
    return np.tile(x, reps)[: int(seconds * rate)]


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/audiotok-bench"))
    p.add_argument("--make-weights", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help="also write the results here")
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
    codec.encode(x[: codec.samples_per_frame * 4])  # warm-up
    enc_s, codes = timed(lambda: codec.encode(x), args.repeats)
    rss_enc = peak_rss_mb()
    dec_s, _ = timed(lambda: codec.decode(codes), args.repeats)
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
