"""Reduced-precision convolutions on a CPU without oneDNN kernels for them (no AVX-512 BF16, AMX
or AVX-NE-CONVERT: e.g. Zen 3): torch's own bfloat16/float16 convolution (its reference kernel)
against nn/kernels' route (the same convolution in float32 on exact copies, rounded back), on
the shapes of a codec's offline pass, then a whole codec (the S2 tiny checkpoint) encoding and
decoding --seconds of audio each way. Medians of --repeats calls, interleaved; the largest
difference between the two results, in units of the dtype's rounding step at the output's
largest value, beside each ratio. On a CPU that has the kernels the route is not taken and the
script says so.

    python benchmarks/kernels/reduced_convs.py --threads 2 --repeats 5 --seconds 4
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser  # noqa: F401  (ROOT puts src/ on the path)

from audiotok.nn.kernels import convs
from audiotok.nn.kernels.cpu import reduced_conv_kernels, this_cpu

# (kind, in, out, kernel, stride, dilation, input steps): a SEANet-like pass over 4 s at 24 kHz
SHAPES = [
    ("conv", 64, 64, 7, 1, 1, 96000), ("conv", 64, 64, 7, 1, 9, 96000),
    ("conv", 128, 256, 8, 4, 1, 24000), ("conv", 512, 512, 3, 1, 1, 1600),
    ("transposed", 256, 128, 8, 4, 1, 6000),
]


def interleaved(forms: dict, repeats: int) -> dict:
    times = {name: [] for name in forms}
    for _ in range(repeats + 1):  # the first round warms up
        for name, fn in forms.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts[1:]) * 1000 for name, ts in times.items()}


def steps(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference in rounding steps of the dtype at the larger result's scale."""
    scale = b.float().abs().max().item() * torch.finfo(b.dtype).eps
    return (a.float() - b.float()).abs().max().item() / scale


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    print(this_cpu().describe(), f"{args.threads} threads, {args.dtype}")
    if reduced_conv_kernels(dtype):
        print(f"this CPU has oneDNN {args.dtype} convolution kernels: the float32 route is off")
        return
    rows = []
    print(f"{'shape':44s} {'torch':>9s} {'float32 route':>14s} {'ratio':>6s}  max diff (steps)")
    with torch.inference_mode():
        for kind, cin, cout, k, s, d, n in SHAPES:
            x = (torch.randn(1, cin, n) * 0.1).to(dtype)
            if kind == "conv":
                w = (torch.randn(cout, cin, k) / (cin * k) ** 0.5).to(dtype)
                forms = {"torch": lambda x=x, w=w, s=s, d=d: F.conv1d(x, w, None, s, 0, d),
                         "route": lambda x=x, w=w, s=s, d=d: convs.conv1d(x, w, None, s, d)}
            else:
                w = (torch.randn(cin, cout, k) / (cin * k) ** 0.5).to(dtype)
                forms = {"torch": lambda x=x, w=w, s=s: F.conv_transpose1d(x, w, None, s),
                         "route": lambda x=x, w=w, s=s: convs.conv_transpose1d_padded(
                             x, w, None, s)}
            med = interleaved(forms, args.repeats)
            label = f"{kind} {cin}->{cout} k{k} s{s} d{d}, {n} steps"
            diff = steps(forms["route"](), forms["torch"]())
            rows.append({"case": label, "torch_ms": med["torch"], "route_ms": med["route"],
                         "max_diff_steps": diff})
            print(f"{label:44s} {med['torch']:7.1f}ms {med['route']:12.1f}ms "
                  f"{med['torch'] / med['route']:6.1f}x  {diff:.1f}")
        import audiotok

        codec = audiotok.load(ROOT / "tests" / "data" / "s2_tiny" / "codec.pth", dtype=dtype)
        audio = torch.randn(1, int(args.seconds * 44100)) * 0.1
        codes = codec.encode(audio, 44100)

        def plain(fn):  # the codec with the route off: torch's kernels
            def run():
                with mock.patch.object(convs, "reduced_conv_kernels", lambda _: True):
                    return fn()
            return run

        encode = lambda: codec.encode(audio, 44100)  # noqa: E731
        decode = lambda: codec.decode(codes)  # noqa: E731
        med = interleaved({"torch encode": plain(encode), "route encode": encode,
                           "torch decode": plain(decode), "route decode": decode}, args.repeats)
        agree = (plain(encode)().tokens == encode().tokens).float().mean().item()
        for way in ("encode", "decode"):
            rows.append({"case": f"S2 tiny {way} {args.seconds:g} s",
                         "torch_ms": med["torch " + way], "route_ms": med["route " + way]})
            torch_ms, route_ms = med["torch " + way], med["route " + way]
            label = f"S2 tiny {way} {args.seconds:g} s"
            print(f"{label:44s} {torch_ms:7.1f}ms {route_ms:12.1f}ms {torch_ms / route_ms:6.1f}x")
        print(f"S2 tiny codes equal between the two: {agree:.1%}")
    if args.json:
        args.json.write_text(json.dumps({"cpu": this_cpu().describe(), "threads": args.threads,
                                         "dtype": args.dtype, "rows": rows,
                                         "s2_codes_equal": agree}, indent=1) + "\n")


if __name__ == "__main__":
    main()
