"""Full-size X-Codec2 with random weights, ours next to transformers' Xcodec2Model on the same
weights and input: load time, peak RSS, encode/decode real-time factor; token agreement.

    python benchmarks/xcodec2_cpu.py --seconds 10 --threads 2 --repeats 3

Needs transformers (the `test` extra). Random weights in the transformers layout are written once
to --workdir (2.5 GB). Each implementation runs in its own process (so peak RSS is its own), one
after the other, on the same 16 kHz signal (examples/speech.wav, looped). transformers gets its
features from SeamlessM4TFeatureExtractor, the extractor X-Codec2 was trained with.
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
from common import median_time, parser, speech
from common import peak_rss_mb as rss_mb


def make_weights(d: Path) -> None:
    from transformers import Xcodec2Config, Xcodec2Model

    torch.manual_seed(0)
    Xcodec2Model(Xcodec2Config()).eval().save_pretrained(d)


def run_ours(d: Path, x: np.ndarray, repeats: int) -> dict:
    import audiotok

    t = time.perf_counter()
    codec = audiotok.load(d)
    load_s, rss_load = time.perf_counter() - t, rss_mb()
    enc_s, codes = median_time(lambda: codec.encode(x, sample_rate=16000), repeats)
    dec_s, audio = median_time(lambda: codec.decode(codes.tokens), repeats)
    return {"load_s": load_s, "rss_after_load_mb": rss_load, "encode_s": enc_s, "decode_s": dec_s,
            "tokens": codes.tokens[0, 0].tolist(), "audio": audio[0, 0].numpy()}


def run_transformers(d: Path, x: np.ndarray, repeats: int) -> dict:
    from transformers import SeamlessM4TFeatureExtractor, Xcodec2Model

    t = time.perf_counter()
    model = Xcodec2Model.from_pretrained(d).eval()
    load_s, rss_load = time.perf_counter() - t, rss_mb()
    fe = SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80, padding_value=1.0, stride=2)
    pad = 320 - x.size % 320

    def encode():
        values = torch.from_numpy(np.pad(x, (0, pad)))[None, None]
        feats = fe(np.pad(x, (160, pad + 160)), sampling_rate=16000, return_tensors="pt")
        with torch.inference_mode():
            return model.encode(values, feats["input_features"]).audio_codes

    enc_s, codes = median_time(encode, repeats)
    with torch.inference_mode():
        dec_s, audio = median_time(lambda: model.decode(codes).audio_values, repeats)
    return {"load_s": load_s, "rss_after_load_mb": rss_load, "encode_s": enc_s, "decode_s": dec_s,
            "tokens": codes[0, 0].tolist(), "audio": audio[0, 0].numpy()}


def child(impl: str, d: Path, seconds: float, threads: int, repeats: int, out: Path) -> None:
    torch.set_num_threads(threads)
    x = speech(seconds, 16000)
    result = (run_ours if impl == "audiotok" else run_transformers)(d, x, repeats)
    result["peak_rss_mb"] = rss_mb()
    np.save(out.with_suffix(".npy"), result.pop("audio"))
    out.write_text(json.dumps(result))


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--child", nargs=2, metavar=("IMPL", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--make-weights", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    d = args.workdir / "xcodec2-random"
    if args.make_weights:
        make_weights(d)
        return
    if args.child:
        child(args.child[0], d, args.seconds, args.threads, args.repeats, Path(args.child[1]))
        return
    if not (d / "model.safetensors").exists():
        subprocess.run([sys.executable, __file__, "--make-weights", "--workdir", str(args.workdir)],
                       check=True)
    results = {}
    for impl in ("audiotok", "transformers"):
        out = args.workdir / f"xcodec2-{impl}.json"
        subprocess.run([sys.executable, __file__, "--child", impl, str(out), "--workdir",
                        str(args.workdir), "--seconds", str(args.seconds), "--threads",
                        str(args.threads), "--repeats", str(args.repeats)], check=True)
        results[impl] = json.loads(out.read_text())
        results[impl]["audio"] = np.load(out.with_suffix(".npy"))
    ours, ref = results["audiotok"], results["transformers"]
    same = np.mean(np.array(ours["tokens"]) == np.array(ref["tokens"]))
    summary = {
        "config": "xcodec2 default (random weights)", "audio_seconds": args.seconds,
        "threads": args.threads, "repeats": args.repeats, "dtype": "float32",
        "torch": torch.__version__,
        "token_agreement": float(same),
        "decode_max_abs_diff": float(np.abs(ours["audio"] - ref["audio"]).max()),
    }
    for impl, r in results.items():
        summary[impl] = {k: round(r[k], 3) for k in ("load_s", "encode_s", "decode_s")}
        summary[impl]["encode_rtf"] = round(r["encode_s"] / args.seconds, 3)
        summary[impl]["decode_rtf"] = round(r["decode_s"] / args.seconds, 3)
        summary[impl]["rss_after_load_mb"] = round(r["rss_after_load_mb"])
        summary[impl]["peak_rss_mb"] = round(r["peak_rss_mb"])
    summary["encode_speedup"] = round(ref["encode_s"] / ours["encode_s"], 2)
    summary["decode_speedup"] = round(ref["decode_s"] / ours["decode_s"], 2)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
