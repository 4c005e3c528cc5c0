"""How close a convolutional decoder is to this CPU's matrix-multiply floor: the decode's
multiply-adds (counted from every convolution's shapes with forward hooks, float32), the
machine's torch.matmul rate at the shapes of the convolutions that do most of them (a k-tap
convolution as an [out, in * k] @ [in * k, steps] product), and the decode time they imply
against the measured one, full size, side by side in one process.

    python benchmarks/codecs/decoder_floor.py --threads 2 --seconds 10 --config 44khz
    python benchmarks/codecs/decoder_floor.py --threads 2 --seconds 10 --model MODEL_FOLDER

Without --model: DAC at --config's released size, random weights (built once into --workdir).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, matmul_gflops, parser

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.nn.conv import CausalConv1d, CausalConvTranspose1d  # noqa: E402
from tests.models.dac import reference  # noqa: E402

CONFIGS = {"44khz": reference.FULL_44, "24khz": reference.FULL_24}
CONVS = (nn.Conv1d, nn.ConvTranspose1d, CausalConv1d, CausalConvTranspose1d)


def count_macs(codec, tokens: torch.Tensor, **decode) -> tuple[dict, dict]:
    """Multiply-adds of one decode of `tokens`, per layer kind, and per product shape
    (out, in * k, steps) of the plain convolutions."""
    macs: dict[str, int] = defaultdict(int)
    shapes: dict[tuple, int] = defaultdict(int)

    def hook(wrapper, args, out):
        module = getattr(wrapper, "conv", wrapper)  # (the causal ones wrap theirs)
        x, k, g = args[0], module.kernel_size[0], module.groups
        if isinstance(module, nn.ConvTranspose1d):
            macs["transposed convolutions"] += \
                x.shape[-1] * module.in_channels * module.out_channels // g * k
            return
        n = out.shape[-1] * module.out_channels * module.in_channels // g * k
        macs[f"convolutions, kernel {k}"] += n
        if g == 1:
            shapes[(module.out_channels, module.in_channels * k, out.shape[-1])] += n

    handles = [m.register_forward_hook(hook) for m in codec.model.modules()
               if isinstance(m, CONVS)]
    with torch.inference_mode():
        codec.decode(tokens, **decode)
    for h in handles:
        h.remove()
    return dict(macs), dict(shapes)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--config", choices=sorted(CONFIGS), default="44khz")
    p.add_argument("--model", help="any audiotok model (default: DAC at --config)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model:
        codec = audiotok.load(args.model)
    else:
        kwargs = CONFIGS[args.config]
        path = args.workdir / f"dac_{args.config}_full" / "weights.pth"
        if not path.exists():
            reference.save_pth(reference.dac_model(kwargs), kwargs, path.parent)
        codec = audiotok.load(path)
    frames = round(args.seconds * codec.frame_rate)
    g = torch.Generator().manual_seed(0)
    tokens = torch.stack([torch.randint(0, n, (frames,), generator=g)
                          for n in codec.codebook_sizes])[None]
    decode = {}
    if codec.global_tokens:  # utterance tokens (BiCodec's speaker)
        decode["globals"] = torch.randint(0, codec.global_codebook_size,
                                          (1, codec.global_tokens), generator=g)
    macs, shapes = count_macs(codec, tokens, **decode)
    total = sum(macs.values())
    main_shapes = sorted(shapes, key=shapes.get, reverse=True)[:3]
    gflops = matmul_gflops(main_shapes, args.repeats)
    times = []
    with torch.inference_mode():
        codec.decode(tokens, **decode)
        for _ in range(args.repeats):
            t = time.perf_counter()
            codec.decode(tokens, **decode)
            times.append(time.perf_counter() - t)
    flop = 2 * total
    best = max(gflops.values())
    floor = flop / best / 1e9
    measured = statistics.median(times)
    share = sum(shapes[s] for s in main_shapes) / total
    print(f"{codec.title}: {total / frames / 1e6:.0f} M multiply-adds per frame ("
          + ", ".join(f"{k} {v / frames / 1e6:.0f} M" for k, v in macs.items()) + ")")
    print(f"{args.seconds:g} s = {frames} frames: {flop / 1e12:.2f} TFLOP; the three largest "
          f"product shapes hold {100 * share:.0f} %")
    print("torch.matmul at those shapes: "
          + ", ".join(f"{k}: {v:.0f} GFLOP/s" for k, v in gflops.items()))
    print(f"floor at the best of them ({best:.0f} GFLOP/s): {floor:.2f} s; audiotok's decode "
          f"{measured:.2f} s ({flop / measured / 1e9:.0f} GFLOP/s, {measured / floor:.2f}x the "
          "floor)")
    if args.json:
        args.json.write_text(json.dumps({"model": codec.title, "seconds": args.seconds,
                                         "macs_per_frame": {k: v / frames
                                                            for k, v in macs.items()},
                                         "gflops": gflops, "floor_s": floor,
                                         "decode_s": measured}, indent=1))


if __name__ == "__main__":
    main()
