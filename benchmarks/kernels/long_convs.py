"""Convolutions over long activations (offline codec passes), float32 on the CPU: torch's conv1d
on channels-first data against the channels-last forms nn/kernels uses (conv2d on [B, C, 1, T]
in channels_last memory, and taps @ weight^T for one input channel), on the shapes of Mimi's
SEANet for 10 s of 24 kHz audio. Medians of --repeats calls, interleaved; the largest output
difference is printed beside each ratio.

    python benchmarks/kernels/long_convs.py --threads 2 --repeats 5
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser  # noqa: F401  (ROOT puts src/ on the path)

from audiotok.nn.conv import CausalConv1d, CausalConvTranspose1d

# (kind, in, out, kernel, stride, input steps): Mimi's encoder and decoder at 10 s
SHAPES = [
    ("conv", 1, 64, 7, 1, 240000), ("conv", 64, 32, 3, 1, 240000),
    ("conv", 32, 64, 1, 1, 240000), ("conv", 64, 128, 8, 4, 240000),
    ("conv", 128, 256, 10, 5, 60000), ("conv", 256, 512, 12, 6, 12000),
    ("conv", 512, 1024, 16, 8, 2000), ("transposed", 1024, 512, 16, 8, 250),
    ("transposed", 256, 128, 10, 5, 12000), ("transposed", 128, 64, 8, 4, 60000),
]


def main() -> None:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"{'shape':42s} {'conv1d':>9s} {'channels-last':>14s} {'ratio':>6s}  max diff")
    with torch.inference_mode():
        for kind, cin, cout, k, s, n in SHAPES:
            layer = (CausalConv1d(cin, cout, k, stride=s) if kind == "conv"
                     else CausalConvTranspose1d(cin, cout, k, stride=s))
            x = torch.randn(1, n, cin).transpose(1, 2)  # channels-last, as the layers pass it
            xc = x.contiguous()
            if kind == "conv":
                def plain(layer=layer, xc=xc):
                    pad = F.pad(xc, (layer.left_pad, -xc.shape[-1] % layer.stride))
                    return layer.conv(pad)
            else:
                def plain(layer=layer, xc=xc):
                    y = layer.conv(xc)
                    return y[..., : y.shape[-1] - layer.trim]
            forms = {"conv1d": plain, "channels-last": lambda layer=layer, x=x: layer(x)}
            times = {name: [] for name in forms}
            for _ in range(args.repeats + 1):  # the first round warms up
                for name, fn in forms.items():
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
            med = {name: statistics.median(ts[1:]) * 1000 for name, ts in times.items()}
            diff = (plain() - layer(x)).abs().max().item()
            label = f"{kind} {cin}->{cout} k{k} s{s}, {n} steps"
            print(f"{label:42s} {med['conv1d']:7.1f}ms {med['channels-last']:12.1f}ms "
                  f"{med['channels-last'] / med['conv1d']:6.2f}  {diff:.1e}")


if __name__ == "__main__":
    main()
