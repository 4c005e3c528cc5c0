"""Mimi streaming decode and encode per step against offline, full size, float32: the cost of
a 1-frame push (80 ms of audio) for one stream and per stream at 8 streams, next to the offline
cost per frame (a 10 s item decoded or encoded whole), interleaved in one run.

    python benchmarks/streaming/mimi_steps.py --threads 2 [--profile] [--floor]

Random weights (layer scales raised and codebooks filled, as the parity tests do); pushes are
timed after the attention window is full (250 transformer steps), the state every later push
has.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser, per_call, product_ms
from models import random_mimi

from audiotok.nn.streaming import stream_copy, streaming


def profile_pushes(model, one: torch.Tensor) -> None:
    """Operators of ten 1-frame decode pushes of one stream, after the window is full."""
    from torch.profiler import profile

    dec = stream_copy(model)
    with streaming(dec):
        for _ in range(130):
            dec.decode(one)
        with profile(record_shapes=True) as prof:
            for _ in range(10):
                dec.decode(one)
    print(prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=30,
        max_shapes_column_width=60))


def floors(codec, tokens: torch.Tensor, streams: int) -> None:
    """The decode push's products alone against the 2x and 1.25x targets' budgets."""
    model, frames = codec.model, tokens.shape[-1]
    offline, offline_all = product_ms(lambda: codec._decode_causal(tokens), 2)
    offline, offline_all = offline / frames, offline_all / frames
    print(f"offline decode per frame: products {offline:.2f} ms of {offline_all:.2f} ms "
          "(profiled)")
    for batch, target in ((1, 2.0), (streams, 1.25)):
        dec, one = stream_copy(model), tokens[..., :1].expand(batch, -1, -1)
        with streaming(dec):
            for _ in range(130):
                dec.decode(one)
            mine, every = product_ms(lambda d=dec, o=one: d.decode(o), 20)
        print(f"decode push, {batch} stream(s), per stream: products {mine / batch:.2f} ms of "
              f"{every / batch:.2f} ms = {mine / batch / offline_all:.2f}x the offline frame "
              f"(target {target}x: {target * offline_all:.2f} ms for everything)")


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--profile", action="store_true",
                   help="also profile ten 1-stream decode pushes (torch.profiler, by operator)")
    p.add_argument("--floor", action="store_true",
                   help="also time the decode push's matrix products and convolutions alone "
                        "(torch.profiler's self times), against the targets' budgets")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    codec = random_mimi()
    model, spf = codec.model, codec.samples_per_frame
    frames = round(args.seconds * codec.frame_rate)
    tokens = torch.randint(0, 2048, (1, 32, frames))
    audio = torch.randn(1, 1, frames * spf) * 0.1
    results: dict[str, list[float]] = {}

    def record(name, seconds):
        results.setdefault(name, []).append(seconds * 1e3)

    with torch.inference_mode():
        for _ in range(args.repeats):
            record("offline decode per frame", per_call(lambda: codec._decode_causal(tokens), 1)
                   / frames)
            record("offline encode per frame", per_call(lambda: codec._encode_causal(audio), 1)
                   / frames)
            for batch in (1, args.streams):
                dec, enc = stream_copy(model), stream_copy(model)
                one = tokens[..., :1].expand(batch, -1, -1)
                piece = audio[..., :spf].expand(batch, -1, -1)
                with streaming(dec), streaming(enc):
                    for _ in range(130):  # fill the attention window
                        dec.decode(one)
                        enc.encode(piece)
                    record(f"decode push, {batch} stream(s), per stream",
                           per_call(lambda d=dec, o=one: d.decode(o), 20) / batch)
                    record(f"encode push, {batch} stream(s), per stream",
                           per_call(lambda e=enc, x=piece: e.encode(x), 20) / batch)
        if args.profile:
            profile_pushes(model, tokens[..., :1])
        if args.floor:
            floors(codec, tokens, args.streams)
    table = {k: statistics.median(v) for k, v in results.items()}
    for k, v in table.items():
        print(f"{k:42s} {v:7.2f} ms")
    for kind in ("decode", "encode"):
        base = table[f"offline {kind} per frame"]
        for batch in (1, args.streams):
            ratio = table[f"{kind} push, {batch} stream(s), per stream"] / base
            table[f"{kind} ratio, {batch} stream(s)"] = ratio
            print(f"{kind} push / offline per frame, {batch} stream(s): {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
