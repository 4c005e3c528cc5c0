"""ONNX export time with and without the direct translation (export/onnx_direct.py: the
exporter's second trace skipped where that is exact), side by side in one process, and the two
exports' results compared through the torch-free runtime.

    python benchmarks/codecs/onnx_export.py --codec xcodec2 --threads 2 --repeats 2
    python benchmarks/codecs/onnx_export.py --codec s2 --threads 2 --repeats 1

Models: the full-size configurations with random weights (benchmarks/models.py). `--repeats`
rounds, which alternate which export goes first. Reports each export's median seconds, the
ratio, and for the last round's two folders the runtime's tokens (equal or not) and largest
audio difference on `--seconds` of speech (default 10).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser, speech
from models import random_weights


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--codec", default="xcodec2")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import audiotok
    from audiotok.export import onnx_direct
    from audiotok.export.onnx import export_onnx
    from audiotok.nn.kernels.cpu import this_cpu

    codec = audiotok.load(random_weights(args.codec, args.workdir), dtype=torch.float32)
    tested = onnx_direct.TESTED_TORCH
    times = {"direct": [], "usual": []}
    folders = {}
    for r in range(args.repeats):
        for way in (("direct", "usual") if r % 2 == 0 else ("usual", "direct")):
            onnx_direct.TESTED_TORCH = tested if way == "direct" else ("none",)
            folder = args.workdir / f"onnx_export_{args.codec}_{way}"
            shutil.rmtree(folder, ignore_errors=True)
            t = time.perf_counter()
            export_onnx(codec, folder)
            times[way].append(time.perf_counter() - t)
            folders[way] = folder
            print(f"round {r}: {way} {times[way][-1]:.1f} s", file=sys.stderr)
    onnx_direct.TESTED_TORCH = tested
    x = speech(args.seconds, codec.sample_rate)
    results = {way: audiotok.load(folder) for way, folder in folders.items()}
    codes = {way: c.encode(x, codec.sample_rate) for way, c in results.items()}
    audio = {way: c.decode(codes["direct"]) for way, c in results.items()}
    direct, usual = statistics.median(times["direct"]), statistics.median(times["usual"])
    report = {
        "codec": args.codec, "threads": args.threads, "rounds": args.repeats,
        "torch": torch.__version__, "cpu": this_cpu().describe(),
        "direct_s": round(direct, 1), "usual_s": round(usual, 1),
        "usual_over_direct": round(usual / direct, 2),
        "tokens_equal": bool(np.array_equal(codes["direct"].tokens, codes["usual"].tokens)),
        "audio_max_diff": float(np.abs(audio["direct"] - audio["usual"]).max()),
    }
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
