"""The two rules for float32 CPU matrix products (nn/kernels) side by side: one codec's
encode and decode under AUDIOTOK_CPU_GEMM=mkl and =onednn, interleaved round by round in one
process; medians, their ratio, and whether the codes and the audio agree across the rules.

    python benchmarks/kernels/cpu_gemm.py --model <checkpoint or hub name> --seconds 10 --threads 2

The rule a CPU gets by default: oneDNN's products on x86 CPUs not made by Intel, where MKL runs
its generic kernels; MKL's elsewhere.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser, speech

import audiotok
from audiotok.nn.kernels import ruleset

RULES = ("mkl", "onednn")


def use(rule: str) -> None:
    os.environ["AUDIOTOK_CPU_GEMM"] = rule
    ruleset.reset()


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", required=True)
    p.set_defaults(repeats=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    default = ruleset.rules().products
    codec = audiotok.load(args.model)
    rate = codec.input_rate
    x = torch.from_numpy(speech(args.seconds, rate))[None].float()
    ops = {"encode": lambda: codec.encode(x, rate)}
    if codec.decode_refusal is None:  # (an encode-only codec times its encoder alone)
        ops["decode"] = lambda: codec.decode(codes["mkl"])
    times: dict[tuple[str, str], list[float]] = {}
    with torch.inference_mode():
        codes, audio = {}, {}
        for rule in RULES:  # (also the warm-up)
            use(rule)
            codes[rule] = codec.encode(x, rate)
            if "decode" in ops:
                audio[rule] = codec.decode(codes["mkl"])
        for _ in range(args.repeats):
            for rule in RULES:
                use(rule)
                for op, run in ops.items():
                    t = time.perf_counter()
                    run()
                    times.setdefault((rule, op), []).append(time.perf_counter() - t)
    differ = int((codes["mkl"].tokens != codes["onednn"].tokens).sum())
    gap = float((audio["mkl"] - audio["onednn"]).abs().max()) if audio else None
    print(f"{codec.title}, {args.seconds:g} s, {args.threads} threads; this CPU's rule: {default}")
    print(f"codes differing between the rules: {differ} of {codes['mkl'].tokens.numel()}"
          + ("" if gap is None else f"; decoded audio within {gap:.1e}"))
    rows = {"default": default, "codes_differ": differ, "audio_max_diff": gap}
    for op in ops:
        mkl, dnn = (statistics.median(times[r, op]) for r in RULES)
        print(f"{op}: mkl {mkl:.3f} s, onednn {dnn:.3f} s: onednn {mkl / dnn:.2f}x")
        rows[op] = {"mkl_s": mkl, "onednn_s": dnn}
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
