"""Side by side with the reference implementations, one run, same weights and input.

    python benchmarks/compare.py --durations 10,60 --threads 2 --repeats 3

For each codec (full-size configuration, random weights written once to --workdir):
  S2:      audiotok float32, audiotok bfloat16, fish-speech reference float32 (benchmarks/peers.py)
  X-Codec2: audiotok float32, audiotok bfloat16, transformers Xcodec2Model float32
each in its own process, one after the other: load time, encode and decode median seconds per
duration (one warm-up first; 60 s and longer are timed once), peak RSS of each step. Then the
precision study: for each reduced-precision run, the fraction of tokens equal to float32 tokens
and the SNR of its decoding of the float32 tokens against float32 decoding, on the golden
signals (tests/data) through the full-size random models. Prints a table, writes JSON.
The peak RSS there is of each step after the earlier ones (freed memory the allocator keeps
counts); `--peaks` measures each task alone in a fresh process instead:

    python benchmarks/compare.py --peaks --codecs s2 --durations 60 --tasks encode
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
from common import ROOT, median_time, parser, peak_rss_mb, reset_peak_rss, speech

PRECISION_SIGNALS = {
    "s2": (ROOT / "tests/data/s2_tiny/expected_pth.npz", ["audio_132377", "audio_352805"]),
    "xcodec2": (ROOT / "tests/data/xcodec2_tiny/cases.npz", ["n49120_waveform",
                                                             "n144000_waveform"]),
}


def weights(codec: str, workdir: Path) -> Path:
    if codec == "s2":
        path = workdir / "s2-pro-random" / "codec.pth"
        if not path.exists():
            subprocess.run([sys.executable, Path(__file__).with_name("s2_cpu.py"),
                            "--make-weights", str(path)], check=True)
        return path
    path = workdir / "xcodec2-random"
    if not (path / "model.safetensors").exists():
        from transformers import Xcodec2Config, Xcodec2Model

        torch.manual_seed(0)
        Xcodec2Model(Xcodec2Config()).eval().save_pretrained(path)
    return path


class Ours:
    def __init__(self, codec: str, path: Path, dtype: str):
        import audiotok

        self.codec = audiotok.load(path, dtype=getattr(torch, dtype))
        self.rate = self.codec.sample_rate

    def encode(self, x: np.ndarray):
        return self.codec.encode(x).tokens

    def decode(self, tokens):
        return self.codec.decode(tokens)[0, 0]


class FishSpeech:
    def __init__(self, codec: str, path: Path, dtype: str):
        from peers import fish_speech_s2

        import audiotok

        ours = audiotok.load(path)
        self.model = fish_speech_s2(ours.config, ours.model.state_dict())
        del ours
        self.rate = 44100

    def encode(self, x: np.ndarray):
        with torch.inference_mode():
            return self.model.encode(torch.from_numpy(x)[None, None])[0]

    def decode(self, tokens):
        with torch.inference_mode():
            lens = torch.tensor([tokens.shape[-1]])
            return self.model.decode(tokens, lens)[0][0, 0]


class Transformers:
    def __init__(self, codec: str, path: Path, dtype: str):
        from peers import transformers_xcodec2

        self.model = transformers_xcodec2(path)
        self.rate = 16000

    def encode(self, x: np.ndarray):
        from peers import seamless_features

        values = torch.from_numpy(np.pad(x, (0, 320 - x.size % 320)))[None, None]
        with torch.inference_mode():
            return self.model.encode(values, seamless_features([x])).audio_codes

    def decode(self, tokens):
        with torch.inference_mode():
            return self.model.decode(tokens).audio_values[0, 0]


IMPLS = {"audiotok": Ours, "fish-speech": FishSpeech, "transformers": Transformers}


def child(codec: str, impl: str, dtype: str, args, out: Path) -> None:
    torch.set_num_threads(args.threads)
    path = weights(codec, args.workdir)
    reset_peak_rss()
    t = time.perf_counter()
    runner = IMPLS[impl](codec, path, dtype)
    result = {"load_s": time.perf_counter() - t, "load_peak_mb": peak_rss_mb(), "runs": {}}
    for secs in args.seconds:
        x = speech(secs, runner.rate)
        repeats = args.repeats if secs < 60 else 1
        reset_peak_rss()
        enc, tokens = median_time(lambda x=x: runner.encode(x), repeats, warmup=secs < 60)
        enc_peak = peak_rss_mb()
        reset_peak_rss()
        dec, _ = median_time(lambda t=tokens: runner.decode(t), repeats, warmup=secs < 60)
        result["runs"][f"{secs:g}"] = {"encode_s": enc, "decode_s": dec, "encode_peak_mb":
                                       enc_peak, "decode_peak_mb": peak_rss_mb()}
    file, keys = PRECISION_SIGNALS[codec]
    with np.load(file) as z:
        signals = {k: z[k] for k in keys}
    tokens = {k: runner.encode(v) for k, v in signals.items()}
    np.savez(out.with_suffix(".npz"), **{f"tokens_{k}": np.asarray(v) for k, v in tokens.items()})
    if dtype != "float32" or impl != "audiotok":  # decode the float32 run's tokens
        ref = np.load(out.parent / f"{codec}-audiotok-float32.npz")
        audio = {k: runner.decode(torch.from_numpy(ref[f"tokens_{k}"])).float().numpy()
                 for k in keys}
        np.savez(out.with_name(out.stem + "-audio.npz"), **audio)
    else:
        audio = {k: runner.decode(t).float().numpy() for k, t in tokens.items()}
        np.savez(out.with_name(out.stem + "-audio.npz"), **audio)
    out.write_text(json.dumps(result))


def peak_child(codec: str, impl: str, dtype: str, task: str, secs: float, args) -> None:
    """One task in a fresh process: its peak RSS (model included), unaffected by earlier tasks
    whose freed memory the allocator still holds. Prints JSON."""
    torch.set_num_threads(args.threads)
    runner = IMPLS[impl](codec, weights(codec, args.workdir), dtype)
    x = speech(secs, runner.rate)
    tokens = runner.encode(x) if task == "decode" else None
    reset_peak_rss()
    t = time.perf_counter()
    runner.encode(x) if task == "encode" else runner.decode(tokens)
    print(json.dumps({"seconds": time.perf_counter() - t, "peak_mb": peak_rss_mb()}))


def fresh_peaks(args, plan: dict) -> dict:
    """Peak RSS of each task, duration and implementation, each in its own process."""
    out: dict = {}
    for codec in args.codecs.split(","):
        for impl, dtype in plan[codec]:
            for task in args.tasks.split(","):
                for secs in args.seconds:
                    r = subprocess.run(
                        [sys.executable, __file__, "--peak-child", codec, impl, dtype, task,
                         str(secs), "--workdir", str(args.workdir), "--threads",
                         str(args.threads)], check=True, capture_output=True, text=True)
                    key = f"{codec} {impl} {dtype} {task} {secs:g} s"
                    out[key] = json.loads(r.stdout.strip().splitlines()[-1])
                    print(key, out[key], flush=True)
    return out


def precision(codec: str, impl: str, dtype: str, workdir: Path) -> dict:
    base = np.load(workdir / f"{codec}-audiotok-float32.npz")
    base_audio = np.load(workdir / f"{codec}-audiotok-float32-audio.npz")
    run = np.load(workdir / f"{codec}-{impl}-{dtype}.npz")
    run_audio = np.load(workdir / f"{codec}-{impl}-{dtype}-audio.npz")
    same = [float((run[k] == base[k]).mean()) for k in base.files]
    snr = []
    for k in base_audio.files:
        a, b = base_audio[k], run_audio[k][: base_audio[k].size]
        snr.append(float(10 * np.log10((a**2).sum() / max(((a - b) ** 2).sum(), 1e-30))))
    return {"tokens_equal": round(float(np.mean(same)), 4), "snr_db": round(min(snr), 1)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio durations, e.g. 10,60")
    p.add_argument("--codecs", default="s2,xcodec2")
    p.add_argument("--child", nargs=4, metavar=("CODEC", "IMPL", "DTYPE", "OUT"),
                   help=argparse.SUPPRESS)
    p.add_argument("--peaks", action="store_true",
                   help="instead: peak RSS of each task in a fresh process (--tasks)")
    p.add_argument("--tasks", default="encode,decode", help="with --peaks")
    p.add_argument("--peak-child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.seconds = [float(s) for s in args.durations.split(",")]
    if args.child:
        codec, impl, dtype, out = args.child
        return child(codec, impl, dtype, args, Path(out))
    if args.peak_child:
        codec, impl, dtype, task, secs = args.peak_child
        return peak_child(codec, impl, dtype, task, float(secs), args)
    plan = {"s2": [("audiotok", "float32"), ("audiotok", "bfloat16"), ("fish-speech", "float32")],
            "xcodec2": [("audiotok", "float32"), ("audiotok", "bfloat16"),
                        ("transformers", "float32")]}
    if args.peaks:
        peaks = fresh_peaks(args, plan)
        if args.json:
            args.json.write_text(json.dumps(peaks, indent=1) + "\n")
        return
    results: dict = {"threads": args.threads, "torch": torch.__version__,
                     "seconds": args.seconds, "repeats": args.repeats}
    for codec in args.codecs.split(","):
        results[codec] = {}
        for impl, dtype in plan[codec]:
            out = args.workdir / f"{codec}-{impl}-{dtype}.json"
            subprocess.run([sys.executable, __file__, "--child", codec, impl, dtype, str(out),
                            "--workdir", str(args.workdir), "--threads", str(args.threads),
                            "--repeats", str(args.repeats), "--durations", args.durations],
                           check=True)
            r = json.loads(out.read_text())
            r["precision_vs_audiotok_float32"] = precision(codec, impl, dtype, args.workdir)
            results[codec][f"{impl} {dtype}"] = r
    print(json.dumps(results, indent=1))
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


def markdown(results: dict) -> str:
    lines = ["| codec | implementation | audio | encode s | vs ref | decode s | vs ref | "
             "peak RSS enc / dec MB | tokens = fp32 | SNR vs fp32 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for codec in ("s2", "xcodec2"):
        if codec not in results:
            continue
        runs = results[codec]
        ref = next(v for k, v in runs.items() if not k.startswith("audiotok"))
        for name, r in runs.items():
            for secs, t in r["runs"].items():
                rt = ref["runs"][secs]
                prec = r["precision_vs_audiotok_float32"]
                lines.append(
                    f"| {codec} | {name} | {secs} s | {t['encode_s']:.2f} | "
                    f"{rt['encode_s'] / t['encode_s']:.2f}x | {t['decode_s']:.2f} | "
                    f"{rt['decode_s'] / t['decode_s']:.2f}x | {t['encode_peak_mb']:.0f} / "
                    f"{t['decode_peak_mb']:.0f} | {prec['tokens_equal'] * 100:.1f} % | "
                    f"{prec['snr_db']} dB |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
