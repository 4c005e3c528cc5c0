"""Short convolutions on the CPU: the forms `nn/kernels`' short_conv1d chooses between, at the
shapes of a full-size S2 decoder's 1-frame push (float32).

    python benchmarks/kernels/short_convs.py --threads 2

For each convolution of the push (the polyphase forms of the transposed convolutions included)
and batch size (streams in one engine step): F.conv1d; the few-row form, linear over the taps
stacked row by row (W @ taps^T); the product over the taps stored row-major, [in * tap, rows]
(W @ taps, a view of the stacked taps for one stream); and short_conv1d itself. Medians of
interleaved calls in ms, with the ratio of W @ taps to the better of the other two.

With --engine, also whole engine steps (--engine-streams streams of 1-frame pushes) and
offline decode (--frames frames) of the full-size S2 Pro configuration (random weights) with
the W @ taps form on (now) and off (conv1d beyond 64 rows, as before), alternating in one
process, so that machine noise hits both alike: medians in ms per stream-frame and per frame.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser

from audiotok.nn.kernels import rules, short_conv1d, use_rules

# (name, in, out, kernel, dilation, output steps of one stream's 1-frame push)
SHAPES = [
    ("decoder conv in", 1024, 1536, 7, 1, 4),
    ("block 1 transposed", 1536, 6144, 2, 1, 4),
    ("block 1 conv d9", 768, 768, 7, 9, 32),
    ("block 1 conv 1x1", 768, 768, 1, 1, 32),
    ("block 2 transposed", 768, 3072, 2, 1, 32),
    ("block 2 conv d9", 384, 384, 7, 9, 256),
    ("block 2 conv 1x1", 384, 384, 1, 1, 256),
    ("block 3 transposed", 384, 768, 2, 1, 256),
    ("block 3 conv d9", 192, 192, 7, 9, 1024),
]


UNBOUNDED = 10**9
# short_conv1d's row thresholds (taps_rows, short_conv_rows) that force one form: taps as the
# product's rows (linear's few-row forms) or as its columns, at every row count
FEW_ROW_FORM = (UNBOUNDED, UNBOUNDED)
ROW_MAJOR_FORM = (1, UNBOUNDED)
BEFORE = (UNBOUNDED, 64)  # few-row form up to 64 rows, conv1d beyond
NOW = (rules().taps_rows, rules().short_conv_rows)


_FORMS: list = []


def set_form(thresholds: tuple[int, int]) -> None:
    """Force short_conv1d's (taps_rows, short_conv_rows) from now on."""
    while _FORMS:
        _FORMS.pop().__exit__(None, None, None)
    if thresholds != NOW:
        form = use_rules(taps_rows=thresholds[0], short_conv_rows=thresholds[1])
        form.__enter__()
        _FORMS.append(form)


def in_form(thresholds: tuple[int, int], x: torch.Tensor, w: torch.Tensor, d: int
            ) -> torch.Tensor:
    set_form(thresholds)
    try:
        return short_conv1d(x, w, None, d)
    finally:
        set_form(NOW)


def interleaved_ms(fns: dict, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {n: [] for n in fns}
    items = list(fns.items())
    for _, fn in items:
        fn()
    for r in range(rounds):
        for name, fn in items[r % len(items):] + items[: r % len(items)]:
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {n: statistics.median(v) * 1e3 for n, v in times.items()}


def engine_steps(model: str, streams: list[int], steps: int, frames: int
                 ) -> dict[str, dict[str, float]]:
    from models import random_tokens

    import audiotok
    from audiotok.server import Engine, EngineSettings

    codec = audiotok.load(model)
    forms = {"off (before)": BEFORE, "on (now)": NOW}
    engines = {}
    for form in forms:
        for n in streams:
            engine = Engine({"m": codec}, EngineSettings(max_streams=n, max_batch=n), start=False)
            engines[form, n] = (engine, [engine.open_decode_stream("m") for _ in range(n)])
    warmup = 3
    tokens = [random_tokens(codec, warmup + steps, i + 1) for i in range(max(streams))]
    whole = random_tokens(codec, frames, 0)[None]
    times: dict = defaultdict(list)
    for f in range(warmup + steps):
        for form in (list(forms) if f % 2 else list(forms)[::-1]):
            set_form(forms[form])
            for n in streams:
                engine, opened = engines[form, n]
                for stream, tok in zip(opened, tokens, strict=False):
                    stream.push(tok[:, f : f + 1])
                t = time.perf_counter()
                engine.step()
                if f >= warmup:
                    times[form, f"{n} streams"].append((time.perf_counter() - t) * 1e3 / n)
                for stream in opened:
                    stream.read()
            if f % 4 == 3:
                t = time.perf_counter()
                codec.decode(whole)
                times[form, "offline"].append((time.perf_counter() - t) * 1e3 / frames)
    set_form(NOW)
    for engine, opened in engines.values():
        for stream in opened:
            stream.abort()
        engine.close()
    out: dict = defaultdict(dict)
    for (form, what), v in times.items():
        out[form][what] = statistics.median(v)
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--batches", default="1,4", help="streams per step")
    p.add_argument("--engine", action="store_true",
                   help="also whole engine steps and offline decode, W @ taps on and off")
    p.add_argument("--engine-streams", default="1,4", help="streams per step (--engine)")
    p.add_argument("--steps", type=int, default=40, help="engine steps per form (--engine)")
    p.add_argument("--frames", type=int, default=64, help="offline decode length (--engine)")
    p.add_argument("--model", help="S2 checkpoint for --engine (default: random full-size)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rounds = max(args.repeats, 12)
    results = []
    with torch.inference_mode():
        for batch in [int(b) for b in args.batches.split(",")]:
            for name, cin, cout, k, d, steps in SHAPES:
                w = torch.randn(cout, cin, k)
                x = torch.randn(batch, cin, steps + (k - 1) * d)
                ref = F.conv1d(x, w, dilation=d)
                fns = {"conv1d": lambda x=x, w=w, d=d: F.conv1d(x, w, dilation=d),
                       "W @ taps^T": lambda x=x, w=w, d=d: in_form(FEW_ROW_FORM, x, w, d),
                       "W @ taps": lambda x=x, w=w, d=d: in_form(ROW_MAJOR_FORM, x, w, d),
                       "short_conv1d": lambda x=x, w=w, d=d: short_conv1d(x, w, None, d)}
                for fn in fns.values():
                    torch.testing.assert_close(fn(), ref, rtol=1e-3, atol=1e-3)
                ms = interleaved_ms(fns, rounds)
                ratio = ms["W @ taps"] / min(ms["conv1d"], ms["W @ taps^T"])
                results.append({"name": name, "batch": batch, "rows": batch * steps, "ms": ms,
                                "row_major_ratio": ratio})
                cells = "  ".join(f"{n} {v:.2f}" for n, v in ms.items())
                print(f"{batch} x {name:18s} ({batch * steps:4d} rows): {cells}  "
                      f"W @ taps / best other {ratio:.2f}")
    engine = None
    if args.engine:
        if args.model is None:
            from models import random_weights

            args.model = str(random_weights("s2", args.workdir))
        streams = [int(n) for n in args.engine_streams.split(",")]
        engine = engine_steps(args.model, streams, args.steps, args.frames)
        for form, ms in engine.items():
            off = ms["offline"]
            print(f"W @ taps {form}: offline decode {off:.1f} ms/frame, " + ", ".join(
                f"{k} {v:.1f} ms per stream-frame ({v / off:.2f}x)"
                for k, v in ms.items() if k != "offline"))
    if args.json:
        args.json.write_text(json.dumps({"convs": results, "engine": engine}, indent=1))


if __name__ == "__main__":
    main()
