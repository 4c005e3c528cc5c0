"""ONNX Runtime next to audiotok's PyTorch path: encode, decode (and for S2 streaming decode) on
the full-size configurations (random weights), float32, side by side in one process.

    python benchmarks/codecs/onnx_speed.py --codec s2 --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec xcodec2 --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec mimi --threads 2 --seconds 10 --push 1
    python benchmarks/codecs/onnx_speed.py --codec snac --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec dac --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec encodec --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec encodec-32khz --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec encodec-48khz --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec neucodec --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec distill-neucodec --threads 2 --seconds 10
    python benchmarks/codecs/onnx_speed.py --codec s3 --threads 2 --seconds 10   (encode only)

Exports the graphs once (audiotok export --format onnx) into --workdir, then times, interleaved
repeat by repeat: encode of `--seconds` of speech, decode of its tokens, and (causal codecs) a
streaming decode of the same tokens in pushes of `--push` frames (PyTorch: Codec.stream_decoder;
ONNX: the step graph). Reports medians, ONNX/PyTorch ratios, and the parity of the ONNX results
(tokens equal, largest audio difference). Both runtimes get the same number of threads.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser, speech
from models import random_weights


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--push", type=int, default=4, help="frames per streaming push")
    p.add_argument("--codec", choices=["s2", "xcodec2", "mimi", "snac", "dac", "encodec",
                                       "encodec-32khz", "encodec-48khz", "neucodec",
                                       "distill-neucodec", "s3"], default="s2")
    p.add_argument("--model", type=Path, help="checkpoint (default: random full-size weights)")
    args = p.parse_args()
    if args.model:
        weights = args.model
    elif args.codec == "s2":
        weights = random_weights("s2", args.workdir)
    elif args.codec == "mimi":  # moshi's MimiModel with random weights (tests/models/mimi)
        weights = args.workdir / "mimi_full" / "tokenizer-test-checkpoint.safetensors"
        if not weights.exists():
            sys.path.insert(0, str(ROOT))
            from tests.models.mimi import reference

            reference.save_both(reference.moshi_model(small=False), weights.parent, small=False)
    elif args.codec == "snac":  # the snac package's 24 kHz model, random weights
        weights = args.workdir / "snac_24khz_full"
        if not (weights / "config.json").exists():
            sys.path.insert(0, str(ROOT))
            from tests.models.snac import reference

            reference.save(reference.snac_model(reference.FULL_24), reference.FULL_24, weights)
    elif args.codec == "dac":  # the dac package's 44.1 kHz model, random weights
        weights = args.workdir / "dac_44khz_full" / "weights.pth"
        if not weights.exists():
            sys.path.insert(0, str(ROOT))
            from tests.models.dac import reference

            reference.save_pth(reference.dac_model(reference.FULL_44), reference.FULL_44,
                               weights.parent)
    elif args.codec.startswith("encodec"):  # the encodec package's modules, random weights
        variant = args.codec[8:] or "24khz"
        weights = args.workdir / f"encodec_{variant}_full" / f"encodec_{variant}-test.th"
        if not weights.exists():
            sys.path.insert(0, str(ROOT))
            from tests.models.encodec import reference

            reference.save_th(reference.encodec_model(variant=variant), weights.parent,
                              weights.name)
    elif args.codec.endswith("neucodec"):  # the neucodec package's modules, random weights
        weights = args.workdir / f"{args.codec}_full" / "pytorch_model.bin"
        if not weights.exists():
            sys.path.insert(0, str(ROOT))
            from tests.models.neucodec import reference

            model = reference.package_model(reference.FULL) if args.codec == "neucodec" else \
                reference.distill_package_model(reference.DISTILL_FULL)
            reference.save_package(model, weights.parent)
    elif args.codec == "s3":  # s3tokenizer's v2 with random weights (tests/models/s3)
        weights = args.workdir / "s3_v2_25hz_full" / "model.pt"
        if not weights.exists():
            sys.path.insert(0, str(ROOT))
            from tests.models.s3 import reference

            reference.save_pt(reference.reference_model("v2_25hz", small=False), weights)
    else:
        weights = random_weights("xcodec2", args.workdir)
    folder = args.workdir / f"{(weights.parent if weights.is_file() else weights).name}-onnx"
    if not (folder / "audiotok_onnx.json").exists():
        t = time.perf_counter()
        cli = [sys.executable, "-c", "from audiotok.cli import main; main()"]
        subprocess.run([*cli, "export", str(weights), "--format", "onnx", "-o", str(folder)],
                       check=True, cwd=ROOT)
        print(f"export: {time.perf_counter() - t:.0f} s", file=sys.stderr)
    torch.set_num_threads(args.threads)
    import audiotok
    from audiotok.nn.kernels.cpu import this_cpu

    ours = audiotok.load(weights, **({"variant": "v2_25hz"} if args.codec == "s3" else {}))
    onnx = audiotok.load(folder, threads=args.threads)
    x = speech(args.seconds, ours.input_rate)  # (NeuCodec: 16 kHz in, 24 kHz out)
    codes = ours.encode(x)
    tokens = codes.tokens
    if not ours.streaming.scales:  # (EnCodec 48 kHz decodes its codes with their scales)
        codes = tokens

    def stream(codec):
        with codec.stream_decoder() as dec:
            return [dec.push(tokens[:, :, i: i + args.push])
                    for i in range(0, tokens.shape[-1], args.push)]

    runs = {"encode": (lambda: ours.encode(x).tokens, lambda: onnx.encode(x).tokens)}
    if ours.decode_refusal is None:  # (S3 encodes only)
        runs["decode"] = (lambda: ours.decode(codes), lambda: onnx.decode(codes))
    if ours.streaming.decode == "layers":
        runs[f"stream decode ({args.push}-frame pushes)"] = (lambda: stream(ours),
                                                             lambda: stream(onnx))
    times = {k: ([], []) for k in runs}
    results = {}
    for k, fns in runs.items():  # warm-up, and the outputs compared below
        results[k] = [fn() for fn in fns]
    for _ in range(args.repeats):
        for k, fns in runs.items():
            for i, fn in enumerate(fns):
                t = time.perf_counter()
                fn()
                times[k][i].append(time.perf_counter() - t)
    enc = results["encode"]
    parity = {"tokens_equal": float((enc[0].numpy() == enc[1]).mean())}
    if "decode" in results:
        dec = results["decode"]
        parity["decode_max_abs"] = float(np.abs(dec[0].numpy() - dec[1]).max())
    if ours.streaming.decode == "layers":
        streamed = np.concatenate([np.asarray(a) for a in results[list(runs)[2]][1]], -1)
        parity["stream_vs_offline_max_abs"] = float(
            np.abs(dec[0].numpy()[..., :streamed.shape[-1]] - streamed).max())
    rows = []
    cpu = this_cpu().describe()
    print(f"{ours.title} full size (random weights), float32, {args.seconds:g} s of speech, "
          f"{args.threads} threads, median of {args.repeats}; {cpu}")
    print("| | PyTorch (s) | ONNX Runtime (s) | ONNX / PyTorch | ONNX real-time factor |")
    print("|---|---|---|---|---|")
    for k, (a, b) in times.items():
        ta, tb = statistics.median(a), statistics.median(b)
        rows.append({"task": k, "pytorch_s": ta, "onnx_s": tb, "ratio": tb / ta,
                     "onnx_rtf": tb / args.seconds})
        print(f"| {k} | {ta:.2f} | {tb:.2f} | {tb / ta:.2f} | {tb / args.seconds:.3f} |")
    print(f"parity: tokens equal {parity['tokens_equal']:.4f}" + (
        f", decode max abs {parity['decode_max_abs']:.2e}" if "decode" in results else "") + (
              f", ONNX stream vs PyTorch offline {parity['stream_vs_offline_max_abs']:.2e}"
              if ours.streaming.decode == "layers" else ""))
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "rows": rows, "parity": parity, "args": {
            "codec": args.codec, "seconds": args.seconds, "threads": args.threads,
            "push": args.push, "repeats": args.repeats}}, indent=1))


if __name__ == "__main__":
    main()
