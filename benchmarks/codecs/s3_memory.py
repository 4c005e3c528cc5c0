"""The S3 tokenizer on many long inputs in one call: time and peak resident memory of audiotok
and of s3tokenizer 0.3.0, each in a fresh process (full size, random weights, float32).

    python benchmarks/codecs/s3_memory.py --variant v1 --items 8 --seconds 60

s3tokenizer pads every window of a long input to 30 s and holds each window's attention scores
(20 heads x 1500 x 1500 at 50 Hz); audiotok runs each window at its own length and never
materialises the scores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser, peak_rss_mb

from audiotok.bench import reset_peak_rss

sys.path.insert(0, str(ROOT))
from tests.models.s3 import reference  # noqa: E402


def child(which: str, args) -> dict:
    import audiotok

    torch.set_num_threads(args.threads)
    path = args.workdir / f"s3_{args.variant}_full" / "model.pt"
    if not path.exists():
        reference.save_pt(reference.reference_model(args.variant, small=False), path)
    waves = [reference.speech_like(int(args.seconds * 16000), seed=i) for i in range(args.items)]
    if which == "audiotok":
        codec = audiotok.load(path, variant=args.variant)
        run = lambda: codec.encode([w[None] for w in waves], 16000)  # noqa: E731
    else:
        ref = reference.reference_model(args.variant, small=False)
        s3 = reference.import_s3tokenizer()

        def run():
            with torch.inference_mode():
                mel, n = s3.padding([s3.log_mel_spectrogram(w) for w in waves])
                return ref.quantize(mel, n)
    reset_peak_rss()
    t = time.perf_counter()
    run()
    return {"seconds": time.perf_counter() - t, "peak_rss_mb": peak_rss_mb()}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--variant", default="v1")
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--child", help="(internal)")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    out = {"variant": args.variant, "items": args.items, "seconds_each": args.seconds}
    for which in ("audiotok", "s3tokenizer 0.3.0"):
        r = subprocess.run([sys.executable, __file__, "--child", which, "--variant",
                            args.variant, "--items", str(args.items), "--seconds",
                            str(args.seconds), "--threads", str(args.threads), "--workdir",
                            str(args.workdir)], check=True, capture_output=True, text=True)
        out[which] = json.loads(r.stdout.strip().splitlines()[-1])
        print(which, out[which], flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
