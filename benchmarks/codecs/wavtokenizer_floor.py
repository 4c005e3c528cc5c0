"""How close WavTokenizer's decode is to this CPU's matrix-multiply floor: the decoder's
multiply-adds (counted from its convolutions' and linears' shapes with forward hooks, plus the
attention's two T x T products), the machine's product rate at the decoder's main shapes (the
best of torch.matmul and the kernel rules' product), and the decode time they imply against
audiotok's and the reference's, full size on random weights, side by side in one process.

    python benchmarks/codecs/wavtokenizer_floor.py --threads 2 --seconds 10
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, matmul_gflops, median_time, parser

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.models.wavtokenizer.model import AttnBlock  # noqa: E402
from audiotok.nn.kernels import linear  # noqa: E402
from tests.models.wavtokenizer import reference  # noqa: E402


def count_macs(codec, frames: int) -> dict[str, int]:
    """Multiply-adds of one decode of `frames` frames, per layer kind."""
    macs: dict[str, int] = defaultdict(int)

    def hook(module, args, out):
        if isinstance(module, nn.Conv1d):
            k = module.kernel_size[0]
            n = out.shape[-1] * module.out_channels * module.in_channels // module.groups * k
            macs[f"convolutions, kernel {k}"] += n
        elif isinstance(module, nn.Linear):
            macs["linears"] += out[..., 0].numel() * module.in_features * module.out_features
        elif isinstance(module, AttnBlock):
            c, t = args[0].shape[1:]
            macs["attention products"] += 2 * t * t * c

    model = codec.model
    handles = [m.register_forward_hook(hook) for m in [*model.backbone.modules(), model.head.linear]
               if isinstance(m, nn.Conv1d | nn.Linear | AttnBlock)]
    tokens = torch.zeros(1, 1, frames, dtype=torch.long)
    with torch.inference_mode():
        codec.decode(tokens)
    for h in handles:
        h.remove()
    return dict(macs)


def timed(fn, repeats: int) -> float:
    return median_time(fn, repeats)[0]


def main() -> None:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(args.threads)
    path = args.workdir / "wavtokenizer_75_full" / "model.ckpt"
    ref = reference.build(reference.FULL_75)
    if not path.exists():
        reference.save_ckpt(ref, path)
    codec = audiotok.load(path)
    frames = round(args.seconds * codec.frame_rate)
    macs = count_macs(codec, frames)
    total = sum(macs.values())
    cfg = codec.config
    shapes = [(frames, cfg.dim, cfg.intermediate_dim), (frames, cfg.intermediate_dim, cfg.dim),
              (cfg.dim, 3 * cfg.dim, frames)]
    gflops = {f"matmul {k}": v for k, v in matmul_gflops(shapes, args.repeats).items()}
    for m, k, n in shapes:  # the kernel rules' product (oneDNN's on AMD CPUs), as Linear runs
        x, w = torch.randn(m, k), torch.randn(n, k)
        gflops[f"rule product {m}x{k} @ {k}x{n}"] = \
            2 * m * k * n / timed(lambda x=x, w=w: linear(x, w, None), args.repeats) / 1e9
    tokens = torch.randint(0, cfg.codebook_size, (1, 1, frames))
    with torch.inference_mode():
        ours = timed(lambda: codec.decode(tokens), args.repeats)
        theirs = timed(lambda: reference.decode(ref, tokens), args.repeats)
    flop = 2 * total
    best = max(gflops.values())
    floor = flop / best / 1e9
    print(f"{codec.title}: {args.seconds:g} s = {frames} frames, {flop / 1e9:.1f} GFLOP ("
          + ", ".join(f"{k} {2 * v / 1e9:.1f}" for k, v in macs.items()) + ")")
    print("products at the decoder's shapes: "
          + ", ".join(f"{k}: {v:.0f} GFLOP/s" for k, v in gflops.items()))
    print(f"floor at the best of them ({best:.0f} GFLOP/s): {floor:.2f} s; audiotok's decode "
          f"{ours:.2f} s ({ours / floor:.2f}x the floor), the reference's {theirs:.2f} s "
          f"({theirs / floor:.2f}x)")
    if args.json:
        args.json.write_text(json.dumps({"seconds": args.seconds, "gflop": flop / 1e9,
                                         "macs": macs, "gflops": gflops, "floor_s": floor,
                                         "decode_s": ours, "reference_decode_s": theirs},
                                        indent=1))


if __name__ == "__main__":
    main()
