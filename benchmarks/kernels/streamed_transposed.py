"""Transposed convolutions in a streamed piece (nn/kernels' forms), float32 on
the CPU: oneDNN's transposed kernel over context + piece (new samples sliced out) against the
polyphase plain convolution (polyphase_transposed), on the shapes of Mimi's SEANet decoder, for
batch x frames from a push's 2 to a long input's piece; then a full-size Mimi offline decode
(long inputs go through the stream in 64-frame pieces) with the threshold TRANSPOSED_ROWS as it
is and off (polyphase always), alternating in one process. Medians in ms.

    python benchmarks/kernels/streamed_transposed.py --threads 2 --repeats 9
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser
from models import random_mimi

from audiotok.nn.kernels import (
    cat_time,
    channels_last,
    conv_transpose1d_padded,
    polyphase_transposed,
    rules,
    use_rules,
)

# (in, out, kernel, stride): Mimi's SEANet decoder
SHAPES = [(1024, 512, 16, 8), (512, 256, 12, 6), (256, 128, 10, 5), (128, 64, 8, 4)]
FRAMES = [2, 16, 96, 480, 2048]


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def kernels(repeats: int) -> list[dict]:
    rows = []
    for cin, cout, k, s in SHAPES:
        conv = torch.nn.ConvTranspose1d(cin, cout, k, stride=s)
        ctx = -(-k // s) - 1
        for batch in (1, 8):
            for frames in FRAMES:
                x = channels_last(torch.randn(batch, cin, frames)).squeeze(2)
                x = cat_time(x.new_zeros(batch, cin, ctx), x)
                transposed = median_ms(lambda x=x, conv=conv, s=s, ctx=ctx: conv_transpose1d_padded(
                    x, conv.weight, conv.bias, s)[..., ctx * s : x.shape[-1] * s], repeats)
                poly = median_ms(lambda x=x, conv=conv, ctx=ctx: polyphase_transposed(x, conv, ctx),
                                 repeats)
                rows.append({"shape": [cin, cout, k, s], "batch": batch, "frames": frames,
                             "transposed_ms": transposed, "polyphase_ms": poly})
                print(f"{cin:4d}->{cout:3d} k{k:2d} s{s}  batch {batch}  {frames:5d} frames "
                      f"({batch * frames:6d} rows): transposed {transposed:8.3f}  polyphase "
                      f"{poly:8.3f}  ratio {transposed / poly:5.2f}")
    return rows


def decodes(seconds: list[float], repeats: int) -> dict:
    codec = random_mimi()
    threshold, out = rules().transposed_rows, {}
    for secs in seconds:
        tokens = torch.randint(0, 2048, (1, 32, round(secs * codec.frame_rate)))
        times: dict[str, list[float]] = {"threshold": [], "polyphase always": []}
        audio = {}
        for _ in range(repeats):
            for name, rows in (("threshold", threshold), ("polyphase always", 1 << 62)):
                with use_rules(transposed_rows=rows):
                    t = time.perf_counter()
                    audio[name] = codec.decode(tokens)
                    times[name].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        diff = (audio["threshold"] - audio["polyphase always"]).abs().max().item()
        out[f"{secs:g} s"] = {**med, "max_diff": diff}
        print(f"Mimi decode {secs:g} s: threshold {med['threshold']:.1f} ms, polyphase always "
              f"{med['polyphase always']:.1f} ms ({med['threshold'] / med['polyphase always']:.2f}x"
              f" the time), audio within {diff:.1e}")
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="Mimi decode lengths in seconds")
    p.add_argument("--skip-kernels", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with torch.inference_mode():
        table = {"kernels": [] if args.skip_kernels else kernels(args.repeats),
                 "decodes": decodes([float(v) for v in args.durations.split(",")], args.repeats)}
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
