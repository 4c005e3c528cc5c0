"""How close NeuCodec's decode is to this CPU's matrix-multiply floor: the decoder's FLOPs for
`--seconds` of audio (its linear layers and convolutions from their weights' sizes, its
attention from the frame count), the machine's torch.matmul throughput at the transformer's main
shape (frames x hidden @ hidden x 4 hidden), the decode time they imply, and audiotok's measured
decode, full size (random weights), float32, in one process.

    python benchmarks/codecs/neucodec_floor.py --threads 2 --seconds 10
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from tests.models.neucodec import reference  # noqa: E402


def main() -> None:
    args = parser(__doc__).parse_args()
    torch.set_num_threads(args.threads)
    weights = args.workdir / "neucodec_full" / "pytorch_model.bin"
    if not weights.exists():  # (benchmarks/codecs/onnx_speed.py --codec neucodec makes the same)
        reference.save_package(reference.package_model(reference.FULL), weights.parent)
    codec = audiotok.load(weights)
    config = codec.model.config
    decoder = codec.model.acoustic_decoder
    frames = int(args.seconds * codec.frame_rate)
    linear = 2 * frames * sum(p.numel() for p in decoder.parameters() if p.dim() == 2)
    conv = 2 * frames * sum(p.numel() for p in decoder.parameters() if p.dim() == 3)
    attention = config.num_hidden_layers * 2 * 2 * frames * frames * config.hidden_size
    a = torch.randn(frames, config.hidden_size)
    w = torch.randn(config.hidden_size, 4 * config.hidden_size)
    times = []
    for _ in range(3 + args.repeats * 5):
        t = time.perf_counter()
        a @ w
        times.append(time.perf_counter() - t)
    rate = 2 * a.numel() * w.shape[1] / statistics.median(times[3:])
    codes = torch.randint(0, codec.codebook_sizes[0], (1, 1, frames))
    codec.decode(codes)
    decode = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        codec.decode(codes)
        decode.append(time.perf_counter() - t)
    total = linear + conv + attention
    print(f"NeuCodec decoder, {args.seconds:g} s ({frames} frames), float32, "
          f"{args.threads} threads")
    print(f"GFLOP: linear layers {linear / 1e9:.0f}, convolutions {conv / 1e9:.0f}, "
          f"attention {attention / 1e9:.0f}, total {total / 1e9:.0f}")
    print(f"torch.matmul [{frames}, {config.hidden_size}] @ [{config.hidden_size}, "
          f"{4 * config.hidden_size}]: {rate / 1e9:.0f} GFLOP/s (median of {len(times) - 3})")
    print(f"floor {total / rate:.2f} s; audiotok decode {statistics.median(decode):.2f} s "
          f"(median of {args.repeats})")


if __name__ == "__main__":
    main()
