"""Streaming pushes with and without packed weights (nn/kernels' packed_weights(), which a
streaming step enters under the oneDNN rule): the time of a 1-frame decode push per stream, at 1
and at --streams streams, the two interleaved in one process, and the largest difference
between their audio.

    python benchmarks/kernels/packed_pushes.py --threads 2   # full-size Mimi, random
    python benchmarks/kernels/packed_pushes.py --threads 2 --model /tmp/s2/codec.pth

Pushes are timed after --warm pushes (Mimi's attention window is full after 125 frames); each
timing is the median of --repeats rounds of 20 pushes.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser, per_call
from models import random_mimi

import audiotok
from audiotok.nn.kernels import onednn_rule, use_rules
from audiotok.nn.kernels.products import _ONEDNN


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default=None, help="a codec name or path (default: full-size "
                   "Mimi with random weights, as mimi_steps.py builds it)")
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--warm", type=int, default=130, help="pushes before the timed ones")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    codec = random_mimi() if args.model is None else audiotok.load(args.model)
    if not onednn_rule() or not _ONEDNN["packed"]:
        raise SystemExit("packed weights apply under the oneDNN rule only "
                         "(AUDIOTOK_CPU_GEMM=onednn)")
    torch.manual_seed(0)
    sizes = codec.codebook_sizes
    frames = torch.stack([torch.randint(0, n, (args.warm + 1,)) for n in sizes])[None]
    results: dict[str, list[float]] = {}
    audio = {}
    for _ in range(args.repeats):
        for packed in (False, True):
            for batch in (1, args.streams):
                with use_rules(packed=packed), codec.stream_decoder(batch) as dec:
                    pcm = [dec.push(frames[..., i : i + 1].expand(batch, -1, -1))
                           for i in range(args.warm)]
                    one = frames[..., -1:].expand(batch, -1, -1)
                    seconds = per_call(lambda d=dec, o=one: d.push(o), 20) / batch
                audio[packed, batch] = torch.cat(pcm, -1)
                name = f"{'packed' if packed else 'dense'}, {batch} stream(s)"
                results.setdefault(name, []).append(seconds * 1e3)
    table = {k: statistics.median(v) for k, v in results.items()}
    for k, v in table.items():
        print(f"decode push per stream, {k:22s} {v:7.2f} ms  (runs: "
              f"{', '.join(f'{x:.2f}' for x in results[k])})")
    for batch in (1, args.streams):
        ratio = table[f"packed, {batch} stream(s)"] / table[f"dense, {batch} stream(s)"]
        diff = (audio[True, batch] - audio[False, batch]).abs().max().item()
        table[f"ratio, {batch} stream(s)"] = ratio
        print(f"{batch} stream(s): packed / dense {ratio:.2f}x, audio within {diff:.1e}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
