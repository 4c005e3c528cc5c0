"""Few-row matrix products on the CPU: the forms `nn/kernels` chooses between, at the shapes of
a full-size S2 streaming push (float32).

    python benchmarks/kernels/products.py --threads 2
    python benchmarks/kernels/products.py --rows 1,2,4,16 \
        --shapes 1536x512,512x512,2048x512,512x2048,4096x2048   # Mimi's (25 Hz, 2 rows a frame)

For each weight [out, in] and row count: F.linear(x, W) (x @ W^T), W @ x^T with x row-major
(so x^T is a column-major operand), W @ X with X = x^T stored row-major, and oneDNN's linear on
the dense weight (with --prepacked, also MKL's packed GEMM and oneDNN's linear on copies
packed for the row count); medians over several distinct weights (so no weight stays in
cache), in ms per product, with the weight read rate (GB/s) and the arithmetic rate (GFLOP/s)
of the fastest.
A plain sum over as many bytes gives the memory read rate to compare with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import median_time, parser

from audiotok.nn.kernels.products import onednn_linear as _onednn_linear

# (out, in): transformer qkv / w1 / w3, w2, ConvNeXt pwconv1, pwconv2, the decoder's first conv
# (1024 -> 1536, kernel 7) and polyphase transposed convs as products over stacked taps
SHAPES = [(3072, 1024), (1024, 3072), (4096, 1024), (1024, 4096), (1536, 7168), (6144, 3072),
          (768, 5376)]
ROWS = [1, 4, 32]


def median_ms(fn, repeats: int) -> float:
    return median_time(fn, repeats)[0] * 1e3


def forms(weights: list[torch.Tensor], x: torch.Tensor) -> dict:
    xt = x.t().contiguous()
    out = {
        "F.linear": lambda: [F.linear(x, w) for w in weights],
        "W @ x^T (x row-major)": lambda: [w @ x.t() for w in weights],
        "W @ X (X row-major)": lambda: [w @ xt for w in weights],
    }
    if torch.backends.mkldnn.is_available():
        out["oneDNN linear"] = lambda: [_onednn_linear(x, w, None) for w in weights]
    return out


def prepacked_forms(weights: list[torch.Tensor], x: torch.Tensor) -> dict:
    """Products on a copy of each weight packed for this row count (packing not timed): MKL's
    packed GEMM and oneDNN's linear on its blocked layout (the form nn/kernels'
    packed_weights() uses under the oneDNN rule)."""
    rows, out = x.shape[0], {}
    try:
        mkl = [torch.ops.mkl._mkl_reorder_linear_weight(w, rows) for w in weights]
        out["MKL packed"] = lambda: [torch.ops.mkl._mkl_linear(x, p, w, None, rows)
                                     for p, w in zip(mkl, weights, strict=True)]
    except (RuntimeError, AttributeError) as e:
        print(f"  MKL packed: {str(e).splitlines()[0][:80]}")
    try:
        dnn = [torch.ops.mkldnn._reorder_linear_weight(w, rows) for w in weights]
        out["oneDNN prepacked"] = lambda: [_onednn_linear(x, p, None) for p in dnn]
    except (RuntimeError, AttributeError) as e:
        print(f"  oneDNN prepacked: {str(e).splitlines()[0][:80]}")
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--weights", type=int, default=4, help="distinct weights per shape")
    p.add_argument("--rows", default=",".join(map(str, ROWS)), help="row counts, e.g. 1,2,4")
    p.add_argument("--shapes", default=None, help="weights OUTxIN, comma-separated (default: "
                   "S2's)")
    p.add_argument("--prepacked", action="store_true",
                   help="also time the products on prepacked weights (MKL, oneDNN)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    reps = max(args.repeats, 9)
    results = []
    shapes = SHAPES if not args.shapes else [tuple(int(v) for v in s.split("x"))
                                             for s in args.shapes.split(",")]
    rows_list = [int(r) for r in args.rows.split(",")]
    for out_dim, in_dim in shapes:
        weights = [torch.randn(out_dim, in_dim) for _ in range(args.weights)]
        mb = out_dim * in_dim * 4 / 1e6
        for rows in rows_list:
            x = torch.randn(rows, in_dim)
            ms = {}
            tried = forms(weights, x)
            if args.prepacked:
                tried.update(prepacked_forms(weights, x))
            for name, fn in tried.items():
                try:
                    ms[name] = median_ms(fn, reps) / len(weights)
                except RuntimeError as e:  # oneDNN without support for this CPU
                    ms[name] = None
                    print(f"  {name}: {str(e).splitlines()[0][:80]}")
            best = min((v, k) for k, v in ms.items() if v is not None)
            row = {"shape": [out_dim, in_dim], "rows": rows, "weight_mb": mb, "ms": ms,
                   "best": best[1], "gb_s": mb / best[0],
                   "gflop_s": 2 * out_dim * in_dim * rows / best[0] / 1e6}
            results.append(row)
            cells = "  ".join(f"{k} {v:.2f}" for k, v in ms.items() if v is not None)
            print(f"W [{out_dim}, {in_dim}] ({mb:.1f} MB), {rows:2d} rows: {cells}  -> best "
                  f"{best[1]}: {row['gb_s']:.1f} GB/s, {row['gflop_s']:.0f} GFLOP/s")
    flat = torch.randn(SHAPES[0][0] * SHAPES[0][1] * 24)
    sum_ms, flat_mb = median_ms(lambda: flat.sum(), reps), flat.numel() * 4 / 1e6
    print(f"plain sum over {flat_mb:.0f} MB: {flat_mb / sum_ms:.1f} GB/s")
    if args.json:
        args.json.write_text(json.dumps({"products": results, "sum_gb_s": flat_mb / sum_ms},
                                        indent=1))


if __name__ == "__main__":
    main()
