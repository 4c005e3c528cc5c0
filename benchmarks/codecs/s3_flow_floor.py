"""How close S3 token-to-audio's flow is to this CPU's matrix-product floor: the flow's
floating-point operations for one decode (counted with torch's FlopCounterMode on the plain
operators of graph-export mode: products, convolutions, attention), the machine's float32
torch.matmul rate at the U-Net's main shapes, and the flow time they imply against the
measured one (released size, random weights; the same tokens and prompt as s3_token2wav.py).

    python benchmarks/codecs/s3_flow_floor.py --threads 2 --seconds 10 --prompt 3
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import ROOT, matmul_gflops, parser

sys.path.insert(0, str(ROOT))


def _sdpa_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    """The CPU attention kernel's products (FlopCounterMode counts it as nothing): Q K^T and
    the weights times V, [B, H, L, E] x [B, H, S, E] and [B, H, S, Ev]."""
    b, h, length, e = query
    return 2 * b * h * length * key[-2] * (e + value[-1])


def matmul_rate(rows: int, repeats: int = 5) -> float:
    """GFLOP/s of float32 torch.matmul over the U-Net's main shapes together: its 256-wide
    activations through the attention projections (256 -> 512) and the feed-forward
    (256 -> 1024 -> 256)."""
    shapes = [(rows, 256, 512), (rows, 512, 256), (rows, 256, 1024), (rows, 1024, 256)]
    rates = matmul_gflops(shapes, repeats)
    flops = [2 * m * k * n / 1e9 for m, k, n in shapes]
    return sum(flops) / sum(f / r for f, r in zip(flops, rates.values(), strict=True))


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--prompt", type=float, default=3.0, help="seconds of voice prompt")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from audiotok.models.s3.token2wav.config import COSYVOICE2
    from audiotok.models.s3.token2wav.model import Token2Wav
    from audiotok.models.s3.token2wav.voice import Voice
    from audiotok.nn.kernels.cpu import this_cpu
    from audiotok.nn.tracing import graph_export

    model = Token2Wav(COSYVOICE2).eval()  # (the counts and times do not depend on the weights)
    g = torch.Generator().manual_seed(0)
    n_prompt, n_tokens = int(25 * args.prompt), int(25 * args.seconds)
    voice = Voice(torch.randint(0, 6561, (n_prompt,), generator=g),
                  torch.randn(2 * n_prompt, 80, generator=g), torch.randn(192, generator=g))
    tokens = torch.randint(0, 6561, (1, n_tokens), generator=g)
    frames = 2 * (n_prompt + n_tokens)
    noise = torch.randn(1, 80, frames, generator=g)

    def flow():
        return model.flow(tokens, voice.tokens[None], voice.mel[None], voice.embedding[None],
                          noise, None)

    with torch.inference_mode():
        # counted in graph-export mode: plain torch operators, which the counter knows (the
        # CPU fast paths' packed products are not aten products)
        sdpa = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_flops}
        with graph_export(), FlopCounterMode(display=False, custom_mapping=sdpa) as counter:
            flow()
        total = counter.get_total_flops()
        by_op = {str(k): v for k, v in counter.get_flop_counts().get("Global", {}).items()}
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            flow()
            times.append(time.perf_counter() - t)
    measured = statistics.median(times)
    rate = matmul_rate(2 * frames)
    out = {"cpu": this_cpu().describe(), "threads": args.threads, "seconds": args.seconds,
           "prompt": args.prompt, "mel_frames": frames, "flow_gflop": round(total / 1e9, 1),
           "gflop_by_op": {k: round(v / 1e9, 1) for k, v in sorted(by_op.items())},
           "matmul_gflops": round(rate, 1), "floor_s": round(total / 1e9 / rate, 2),
           "measured_s": round(measured, 2),
           "measured_over_floor": round(measured / (total / 1e9 / rate), 2)}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
