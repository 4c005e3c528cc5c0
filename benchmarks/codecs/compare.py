"""audiotok side by side with a codec's reference implementations: the same random full-size
weights, the same input, one run.

    python benchmarks/codecs/compare.py --codec dac --variant 44khz --durations 10,60
    python benchmarks/codecs/compare.py --codec encodec --variant 48khz --durations 10 --floor
    python benchmarks/codecs/compare.py --codec s2,xcodec2 --isolated --durations 10,60

Codecs and their references are the entries of references.py (`--list` prints them). By default
the implementations run interleaved round by round in one process: the median time of encode
and decode per duration, the real-time factor, the extra resident memory of the call, whether
the codes are equal, and audiotok against the faster reference. Inputs are whole frames of
speech (examples/speech.wav looped), run under torch.inference_mode. `--dtypes float32,bfloat16`
adds audiotok in bfloat16; `--floor` also profiles each encode (its products alone against all
its operators).

`--isolated` runs each implementation in its own process instead (audiotok float32 and
bfloat16, then each reference): load time, each step's peak RSS, and the precision study (the
fraction of tokens equal to audiotok float32's and the SNR of its decoding of those tokens, on
the entry's golden signals). `--peaks` measures one task alone per fresh process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import encode_decode_rounds, median_time, parser, peak_rss_mb, product_ms, report_rounds
from references import ISOLATED, REFERENCES, VARIANTS, all_equal, clip, load, ours_impl

from audiotok.bench import reset_peak_rss


def implementations(side, dtypes: list[str]) -> tuple[dict, int]:
    """(name -> Impl: audiotok in each dtype, then the side's references; the input rate)."""
    impls = {}
    for dtype in dtypes:
        codec = load(side, getattr(torch, dtype))
        name = "audiotok" if dtype == "float32" else f"audiotok {dtype}"
        impls[name] = (side.ours or ours_impl)(codec)
    for name, build in side.references.items():
        impls[name] = build(codec)
    return impls, codec.input_rate


def side_by_side(codec: str, args) -> list[dict]:
    """The interleaved rounds of one codec: rows for the JSON file."""
    side = REFERENCES[codec](args, args.variant)
    impls, rate = implementations(side, args.dtypes)
    rows: list[dict] = []
    for seconds in args.seconds:
        x = side.prepare(clip(seconds, rate, side.align))
        pairs = {name: (lambda x=x, i=impl: i.encode(x), impl.decode)
                 for name, impl in impls.items()}
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(pairs, args.repeats)
            references = {k: v for k, v in codes.items() if not k.startswith("audiotok ")}
            same = (side.same or all_equal)(references)
            report_rounds(rows, times, memory, same, x.shape[-1] / rate, seconds)
            if side.after is not None:
                rows.append(side.after(seconds, impls, codes))
            if args.floor:
                floors(pairs, seconds)
    if side.finish is not None:
        rows += side.finish()
    return rows


def floors(pairs: dict, seconds: float) -> None:
    """Each implementation's encode: the time in its products (convolutions, LSTM, matrix
    products) alone and in all its operators, profiled over two calls."""
    got = {name: product_ms(enc, 2) for name, (enc, _) in pairs.items()}
    for name, (products, every) in got.items():
        print(f"{seconds:5.1f} s encode {name:15s} products {products:6.0f} ms of {every:6.0f} ms "
              "(profiled)")
    best = min(every for name, (_, every) in got.items() if not name.startswith("audiotok"))
    print(f"{seconds:5.1f} s encode: the faster reference's operators over audiotok's products "
          f"alone: {best / got['audiotok'][0]:.2f}x")


# --isolated: each implementation in its own process

def isolated_impl(codec: str, name: str, args):
    """(side, Impl, input rate, load seconds, load peak MB) of one implementation, alone in
    this process."""
    side = REFERENCES[codec](args, args.variant)
    reset_peak_rss()
    t = time.perf_counter()
    ours_side = name.startswith("audiotok")
    dtype = (name.partition(" ")[2] or "float32") if ours_side else "float32"
    ours = load(side, getattr(torch, dtype))
    rate = ours.input_rate
    impl = (side.ours or ours_impl)(ours) if ours_side else side.references[name](ours)
    del ours
    return side, impl, rate, time.perf_counter() - t, peak_rss_mb()


def child(codec: str, name: str, args, out: Path) -> None:
    torch.set_num_threads(args.threads)
    side, impl, rate, load_s, load_mb = isolated_impl(codec, name, args)
    result = {"load_s": load_s, "load_peak_mb": load_mb, "runs": {}}
    with torch.inference_mode():
        for secs in args.seconds:
            x = side.prepare(clip(secs, rate, side.align))
            repeats = args.repeats if secs < 60 else 1
            reset_peak_rss()
            enc, tokens = median_time(lambda x=x: impl.encode(x), repeats, warmup=secs < 60)
            enc_peak = peak_rss_mb()
            reset_peak_rss()
            dec, _ = median_time(lambda t=tokens: impl.decode(t), repeats, warmup=secs < 60)
            result["runs"][f"{secs:g}"] = {"encode_s": enc, "decode_s": dec,
                                           "encode_peak_mb": enc_peak,
                                           "decode_peak_mb": peak_rss_mb()}
        signals = {k: torch.from_numpy(v)[None, None] for k, v in side.signals.items()}
        tokens = {k: impl.encode(v) for k, v in signals.items()}
        np.savez(out.with_suffix(".npz"), **{k: np.asarray(v) for k, v in tokens.items()})
        if name != "audiotok":  # decode the float32 run's tokens
            base = np.load(out.parent / f"{codec}-audiotok.npz")
            tokens = {k: torch.from_numpy(base[k]) for k in signals}
        audio = {k: impl.decode(t).float().reshape(-1).numpy() for k, t in tokens.items()}
    np.savez(out.with_name(out.stem + "-audio.npz"), **audio)
    out.write_text(json.dumps(result))


def peak_child(codec: str, name: str, task: str, secs: float, args) -> None:
    """One task in a fresh process: its peak RSS (model included), unaffected by earlier tasks
    whose freed memory the allocator still holds. Prints JSON."""
    torch.set_num_threads(args.threads)
    side, impl, rate, _, _ = isolated_impl(codec, name, args)
    x = side.prepare(clip(secs, rate, side.align))
    with torch.inference_mode():
        tokens = impl.encode(x) if task == "decode" else None
        reset_peak_rss()
        t = time.perf_counter()
        impl.encode(x) if task == "encode" else impl.decode(tokens)
    print(json.dumps({"seconds": time.perf_counter() - t, "peak_mb": peak_rss_mb()}))


def isolated_names(codec: str, args) -> list[str]:
    names = ["audiotok" if d == "float32" else f"audiotok {d}" for d in args.dtypes]
    return names + list(REFERENCES[codec](args, args.variant).references)


def _forward(args) -> list[str]:
    out = ["--workdir", str(args.workdir), "--threads", str(args.threads), "--repeats",
           str(args.repeats), "--durations", args.durations]
    return out + (["--variant", args.variant] if args.variant else [])


def isolated(codec: str, args) -> dict:
    results = {}
    for name in isolated_names(codec, args):
        out = args.workdir / f"{codec}-{name.replace(' ', '-')}.json"
        subprocess.run([sys.executable, __file__, "--child", codec, name, str(out),
                        *_forward(args)], check=True)
        r = json.loads(out.read_text())
        r["precision_vs_audiotok_float32"] = precision(codec, name, args.workdir)
        results[name] = r
    return results


def fresh_peaks(codec: str, args) -> dict:
    out: dict = {}
    for name in isolated_names(codec, args):
        for task in args.tasks.split(","):
            for secs in args.seconds:
                r = subprocess.run([sys.executable, __file__, "--peak-child", codec, name, task,
                                    str(secs), *_forward(args)],
                                   check=True, capture_output=True, text=True)
                key = f"{codec} {name} {task} {secs:g} s"
                out[key] = json.loads(r.stdout.strip().splitlines()[-1])
                print(key, out[key], flush=True)
    return out


def precision(codec: str, name: str, workdir: Path) -> dict:
    stem = f"{codec}-{name.replace(' ', '-')}"
    base = np.load(workdir / f"{codec}-audiotok.npz")
    base_audio = np.load(workdir / f"{codec}-audiotok-audio.npz")
    run, run_audio = np.load(workdir / f"{stem}.npz"), np.load(workdir / f"{stem}-audio.npz")
    same = [float((run[k] == base[k]).mean()) for k in base.files]
    snr = []
    for k in base_audio.files:
        a, b = base_audio[k], run_audio[k][: base_audio[k].size]
        snr.append(float(10 * np.log10((a**2).sum() / max(((a - b) ** 2).sum(), 1e-30))))
    return {"tokens_equal": round(float(np.mean(same)), 4), "snr_db": round(min(snr), 1)}


def markdown(results: dict) -> str:
    lines = ["| codec | implementation | audio | encode s | vs ref | decode s | vs ref | "
             "peak RSS enc / dec MB | tokens = fp32 | SNR vs fp32 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for codec, runs in results.items():
        ref = next(v for k, v in runs.items() if not k.startswith("audiotok"))
        for name, r in runs.items():
            for secs, t in r["runs"].items():
                rt, prec = ref["runs"][secs], r["precision_vs_audiotok_float32"]
                lines.append(
                    f"| {codec} | {name} | {secs} s | {t['encode_s']:.2f} | "
                    f"{rt['encode_s'] / t['encode_s']:.2f}x | {t['decode_s']:.2f} | "
                    f"{rt['decode_s'] / t['decode_s']:.2f}x | {t['encode_peak_mb']:.0f} / "
                    f"{t['decode_peak_mb']:.0f} | {prec['tokens_equal'] * 100:.1f} % | "
                    f"{prec['snr_db']} dB |")
    return "\n".join(lines)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--codec", default="s2", help="comma-separated entries of references.py")
    p.add_argument("--variant", help="a codec's variant (--list shows them)")
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    p.add_argument("--dtypes", default="float32", help="audiotok's, e.g. float32,bfloat16")
    p.add_argument("--bandwidth", type=float, help="EnCodec's (default 24, 2.2 at 32 kHz)")
    p.add_argument("--whole", action="store_true",
                   help="NeuCodec: encode inputs over 30 s whole, as the references do")
    p.add_argument("--floor", action="store_true", help="also profile each encode's products")
    p.add_argument("--isolated", action="store_true",
                   help="each implementation in its own process, with the precision study")
    p.add_argument("--peaks", action="store_true",
                   help="each task's peak RSS in a fresh process (--tasks)")
    p.add_argument("--tasks", default="encode,decode", help="with --peaks")
    p.add_argument("--list", action="store_true", help="print the codecs and variants")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--peak-child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.list:
        for name in REFERENCES:
            print(name, " ".join(VARIANTS.get(name, ())))
        return
    args.seconds = [float(s) for s in args.durations.split(",")]
    args.dtypes = args.dtypes.split(",")
    torch.set_num_threads(args.threads)
    if args.child:
        codec, name, out = args.child
        return child(codec, name, args, Path(out))
    if args.peak_child:
        codec, name, task, secs = args.peak_child
        return peak_child(codec, name, task, float(secs), args)
    codecs = args.codec.split(",")
    for codec in codecs:
        if codec not in REFERENCES:
            p.error(f"unknown codec {codec!r}: one of {', '.join(REFERENCES)}")
        if args.variant and args.variant not in VARIANTS.get(codec, ()):
            p.error(f"{codec} has no variant {args.variant!r}")
        if (args.isolated or args.peaks) and codec not in ISOLATED:
            p.error(f"--isolated and --peaks need an entry with golden signals whose references "
                    f"load from its checkpoint ({codec} has none)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.peaks:
        out = {k: v for codec in codecs for k, v in fresh_peaks(codec, args).items()}
    elif args.isolated:
        out = {codec: isolated(codec, args) for codec in codecs}
        print(json.dumps(out, indent=1))
        print(markdown(out))
    else:
        out = {codec: side_by_side(codec, args) for codec in codecs}
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "torch": torch.__version__,
                                         "results": out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
