"""Measure the kernel rules on this machine (`audiotok bench --kernels`): for each choice in
rules.Rules that differs between CPUs, time the competing forms at a codec's shapes, in
float32 at the current thread count, interleaved, and keep the faster.

- products: MKL's F.linear against oneDNN's linear at 64 and 256 rows of three weight shapes;
- packed: under the oneDNN rule, oneDNN's linear on packed weight copies against the form that
  runs otherwise, at 4 and 16 rows;
- short_conv_rows, short_narrow_rows: a convolution as one product over its stacked taps
  against conv1d's kernel, at 16-256 output rows of three convolution shapes of 7 taps, and of
  three of 1 or 2 taps (the largest row count up to which the product is the faster at every
  count);
- transposed_rows: a streamed transposed convolution's polyphase product against oneDNN's
  transposed kernel, at 64-2048 rows (the smallest count from which the kernel is the faster).

Each is the median over interleaved rounds, with several weights in turn so that a weight does
not stay in cache (a streaming step reads each layer's weight once). A measured choice replaces
the CPU's default only where one form clearly wins (WIN); near ties keep the default, so that a
noisy machine does not flip a rule from one calibration to the next.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .convs import conv1d, short_conv1d, transposed_new_samples
from .cpu import this_cpu
from .products import PACK_ROWS, onednn_linear, pack
from .ruleset import Rules, calibration_file, default_rules, onednn_available, use_rules

PRODUCT_SHAPES = ((512, 512), (2048, 512), (512, 2048))  # (out, in)
PACKED_SHAPES = ((1536, 512), (512, 2048), (2048, 1024))
# (in, out, kernel, dilation): a codec decoder's residual convolutions, pointwise ones and a
# transposed convolution's polyphase form
WIDE_SHAPES = ((384, 384, 7, 9), (768, 768, 7, 1), (384, 384, 7, 3))
NARROW_SHAPES = ((384, 384, 1, 1), (768, 768, 1, 1), (768, 3072, 2, 1))
CONV_ROWS = (16, 32, 64, 128, 256)
TRANSPOSED_SHAPE = (768, 384, 2)  # in, out, stride (kernel 2 x stride)
TRANSPOSED_ROWS = (64, 128, 256, 512, 1024, 2048)
WIN = 0.8  # a form replaces the default's when it takes at most this fraction of its time


def calibrate(rounds: int = 7, log: Callable[[str], None] | None = None) -> tuple[Rules, dict]:
    """The rules measured here (starting from this CPU's defaults) and the timings behind each
    choice (median ms per call)."""
    say = log or (lambda _: None)
    default = default_rules(this_cpu())
    rules = replace(default, source=f"calibrated on {date.today()}")
    found: dict = {"cpu": this_cpu().describe(), "threads": torch.get_num_threads(),
                   "torch": torch.__version__}
    with torch.inference_mode():
        if onednn_available():
            ratio, found["products"] = _products(rounds)
            products = "onednn" if ratio <= WIN else "mkl" if ratio >= 1 / WIN else \
                default.products
            rules = replace(rules, products=products)
            say(f"products: oneDNN / MKL {ratio:.2f} -> {rules.products}")
        else:
            rules = replace(rules, products="mkl", packed=False)
        if rules.products == "onednn":
            ratio, found["packed"] = _packed(rounds)
            packed = True if ratio <= WIN else False if ratio >= 1 / WIN else default.packed
            rules = replace(rules, packed=packed)
            say(f"packed weights: packed / dense {ratio:.2f} -> {rules.packed}")
        with use_rules(rules):
            rules = replace(rules, short_conv_rows=_short_conv_rows(
                rounds, found, WIDE_SHAPES, default.short_conv_rows), short_narrow_rows=(
                _short_conv_rows(rounds, found, NARROW_SHAPES, default.short_narrow_rows)))
        say(f"short convolutions: one product up to {rules.short_conv_rows} rows (1 or 2 taps: "
            f"{rules.short_narrow_rows})")
        with use_rules(rules):
            rules = replace(rules, transposed_rows=_transposed_rows(rounds, found,
                                                                     default.transposed_rows))
        say(f"streamed transposed convolutions: oneDNN's kernel from {rules.transposed_rows} "
            "rows")
    return rules, found


def save(rules: Rules, found: dict, path: Path | None = None) -> Path:
    """Write the rules (and their timings) where ruleset.py finds them for this machine."""
    path = path or calibration_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"rules": rules.to_dict(), "measured": found}, indent=1) + "\n")
    tmp.replace(path)
    return path


def _median_ms(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median ms per call of each fn, the fns interleaved round by round after a warm call."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _weights(out: int, inp: int, n: int = 4) -> list[torch.Tensor]:
    return [torch.randn(out, inp) / inp**0.5 for _ in range(n)]


def _products(rounds: int) -> tuple[float, dict]:
    ratios, found = [], {}
    for out, inp in PRODUCT_SHAPES:
        ws = _weights(out, inp)
        for rows in (64, 256):
            x = torch.randn(rows, inp)
            t = _median_ms({"mkl": lambda x=x, ws=ws: [F.linear(x, w) for w in ws],
                            "onednn": lambda x=x, ws=ws: [onednn_linear(x, w, None) for w in ws]},
                           rounds)
            found[f"{rows}x{inp}->{out}"] = t
            ratios.append(t["onednn"] / t["mkl"])
    return _geomean(ratios), found


def _packed(rounds: int) -> tuple[float, dict]:
    ratios, found = [], {}
    for out, inp in PACKED_SHAPES:
        ws = _weights(out, inp)
        packs = [pack(w) for w in ws]
        for rows in (4, PACK_ROWS):
            x = torch.randn(rows, inp)
            dense = (lambda x=x, ws=ws: [onednn_linear(x, w, None) for w in ws]) if rows >= 8 \
                else (lambda x=x, ws=ws: [(w @ x.t()).t().contiguous() for w in ws])
            t = _median_ms({"dense": dense, "packed": lambda x=x, packs=packs: [
                onednn_linear(x, p, None) for p in packs]}, rounds)
            found[f"{rows}x{inp}->{out}"] = t
            ratios.append(t["packed"] / t["dense"])
    return _geomean(ratios), found


def _short_conv_rows(rounds: int, found: dict, shapes, default: int) -> int:
    """`default`, unless the product over the taps is clearly the slower form (geometric mean
    over `shapes`) at a row count up to it: then the largest of CONV_ROWS below the first such
    count (the smallest if it is the first)."""
    found.setdefault("short_conv", {})
    chosen = default
    for rows in CONV_ROWS:
        if rows > default:
            break
        ratios = []
        for cin, cout, k, d in shapes:
            x = torch.randn(1, cin, rows + (k - 1) * d).transpose(1, 2).contiguous().mT
            ws = [w.view(cout, cin, k) for w in _weights(cout, cin * k)]
            with use_rules(short_conv_rows=1 << 30, short_narrow_rows=1 << 30):
                product = _median_ms({"p": lambda x=x, ws=ws, d=d: [
                    short_conv1d(x, w, None, d) for w in ws]}, rounds)["p"]
            kernel = _median_ms({"k": lambda x=x, ws=ws, d=d: [
                conv1d(x, w, None, 1, d) for w in ws]}, rounds)["k"]
            found["short_conv"][f"{rows} rows {cin}->{cout} k{k} d{d}"] = {
                "product": product, "conv1d": kernel}
            ratios.append(product / kernel)
        if _geomean(ratios) >= 1 / WIN:
            earlier = [r for r in CONV_ROWS if r < rows]
            return earlier[-1] if earlier else CONV_ROWS[0]
    return chosen


def _transposed_rows(rounds: int, found: dict, default: int) -> int:
    """The smallest of TRANSPOSED_ROWS from which oneDNN's transposed kernel clearly wins at
    every count; twice the largest if the polyphase form clearly wins at every count; else
    `default`."""
    cin, cout, s = TRANSPOSED_SHAPE
    convs = []
    for _ in range(4):
        c = nn.ConvTranspose1d(cin, cout, 2 * s, s)
        c.requires_grad_(False)
        convs.append(c)
    kernel_wins, poly_wins, found["transposed"] = [], [], {}
    for rows in TRANSPOSED_ROWS:
        x = torch.randn(1, cin, rows + 1).transpose(1, 2).contiguous().mT  # channels-last
        with use_rules(transposed_rows=1 << 30):
            poly = _median_ms({"p": lambda x=x: [
                transposed_new_samples(x, c, 1) for c in convs]}, rounds)["p"]
        with use_rules(transposed_rows=0):
            kernel = _median_ms({"k": lambda x=x: [
                transposed_new_samples(x, c, 1) for c in convs]}, rounds)["k"]
        found["transposed"][f"{rows} rows"] = {"polyphase": poly, "kernel": kernel}
        kernel_wins.append(kernel <= WIN * poly)
        poly_wins.append(poly <= WIN * kernel)
    for i, rows in enumerate(TRANSPOSED_ROWS):
        if all(kernel_wins[i:]):
            return rows
    return TRANSPOSED_ROWS[-1] * 2 if all(poly_wins) else default
