"""How close DAC's decode is to this CPU's matrix-multiply floor: the decoder's multiply-adds per
frame (counted from its convolutions' shapes with forward hooks, float32), the machine's
torch.matmul throughput at the decoder's main shapes (the k-tap convolutions as
[out, in * k] @ [in * k, steps] products), and the decode time they imply against the measured
one, full size, side by side in one process.

    python benchmarks/codecs/dac_floor.py --threads 2 --seconds 10 --config 44khz
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, matmul_gflops, parser

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.nn.conv import Conv1d, ConvTranspose1d  # noqa: E402
from tests.models.dac import reference  # noqa: E402

CONFIGS = {"44khz": reference.FULL_44, "24khz": reference.FULL_24}


def count_macs(codec, frames: int) -> dict[str, int]:
    """Multiply-adds of one decode of `frames` frames, per layer kind."""
    macs: dict[str, int] = defaultdict(int)

    def hook(module, args, out):
        x = args[0]
        k = module.kernel_size[0]
        if isinstance(module, ConvTranspose1d):
            n = x.shape[-1] * module.in_channels * module.out_channels // module.groups * k
            macs["transposed convolutions"] += n
        else:
            n = out.shape[-1] * module.out_channels * module.in_channels // module.groups * k
            macs[f"convolutions, kernel {k}"] += n

    handles = [m.register_forward_hook(hook) for m in codec.model.decoder.modules()
               if isinstance(m, Conv1d | ConvTranspose1d)]
    tokens = torch.zeros(1, codec.num_codebooks, frames, dtype=torch.long)
    with torch.inference_mode():
        codec.decode(tokens)
    for h in handles:
        h.remove()
    return dict(macs)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--config", choices=sorted(CONFIGS), default="44khz")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    kwargs = CONFIGS[args.config]
    path = args.workdir / f"dac_{args.config}_full" / "weights.pth"
    if not path.exists():
        reference.save_pth(reference.dac_model(kwargs), kwargs, path.parent)
    codec = audiotok.load(path)
    frames = round(args.seconds * codec.frame_rate)
    per_frame = {k: v / 64 for k, v in count_macs(codec, 64).items()}
    total = sum(per_frame.values())
    # the residual units' k7 convolutions dominate: their shapes at each block's rate, for the
    # frames of --seconds (steps = frames x the block's upsampling so far)
    c, steps, shapes = codec.config.decoder_dim, frames, []
    for s in codec.config.decoder_rates:
        c, steps = c // 2, steps * s
        shapes.append((c, 7 * c, steps))
    gflops = matmul_gflops(shapes, args.repeats)
    tokens = torch.randint(0, 1024, (1, codec.num_codebooks, frames))
    times = []
    with torch.inference_mode():
        codec.decode(tokens)
        for _ in range(args.repeats):
            t = time.perf_counter()
            codec.decode(tokens)
            times.append(time.perf_counter() - t)
    flop = 2 * total * frames
    best = max(gflops.values())
    floor = flop / best / 1e9
    measured = statistics.median(times)
    print(f"{codec.title} {args.config}: {total / 1e6:.0f} M multiply-adds per frame ("
          + ", ".join(f"{k} {v / 1e6:.0f} M" for k, v in per_frame.items()) + ")")
    print(f"{args.seconds:g} s = {frames} frames: {flop / 1e12:.2f} TFLOP")
    print("torch.matmul at the residual units' shapes: "
          + ", ".join(f"{k}: {v:.0f} GFLOP/s" for k, v in gflops.items()))
    print(f"floor at the best of them ({best:.0f} GFLOP/s): {floor:.2f} s; audiotok's decode "
          f"{measured:.2f} s ({flop / measured / 1e9:.0f} GFLOP/s, {measured / floor:.2f}x the "
          "floor)")
    if args.json:
        args.json.write_text(json.dumps({"macs_per_frame": per_frame, "gflops": gflops,
                                         "floor_s": floor, "decode_s": measured}, indent=1))


if __name__ == "__main__":
    main()
