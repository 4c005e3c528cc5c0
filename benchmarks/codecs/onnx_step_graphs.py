"""A causal codec's ONNX export with and without its whole-input graphs (`--step-graphs-only`):
export time and size of each, and whole-input encode and decode through each folder in the
torch-free runtime, interleaved in one process (medians), with the results compared.

    python benchmarks/codecs/onnx_step_graphs.py --codec s2 --seconds 10 --threads 2

Full-size S2 on random weights (benchmarks/models.py). Both folders are exported once into
--workdir.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser, speech
from models import random_weights


def export(weights: Path, folder: Path, *options: str) -> dict:
    """Export once; the seconds it took (None when the folder was there) and its MiB."""
    seconds = None
    if not (folder / "audiotok_onnx.json").exists():
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from audiotok.cli import main; main()", "export",
                        str(weights), "--format", "onnx", "-o", str(folder), *options],
                       check=True, cwd=ROOT)
        seconds = time.perf_counter() - t
    size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
    return {"export_s": seconds, "mib": size}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--codec", choices=["s2"], default="s2")
    args = p.parse_args()
    weights = random_weights(args.codec, args.workdir)
    name = weights.parent.name if weights.is_file() else weights.name
    folders = {"whole": args.workdir / f"{name}-onnx",
               "steps": args.workdir / f"{name}-onnx-steps"}
    facts = {"whole": export(weights, folders["whole"]),
             "steps": export(weights, folders["steps"], "--step-graphs-only")}
    import audiotok
    from audiotok.nn.kernels.cpu import this_cpu

    codecs = {k: audiotok.load(f, threads=args.threads) for k, f in folders.items()}
    x = speech(args.seconds, codecs["whole"].input_rate)
    codes = codecs["whole"].encode(x)
    times = {(k, task): [] for k in codecs for task in ("encode", "decode")}
    out = {}
    for _ in range(args.repeats + 1):  # (the first round warms up, untimed)
        for k, codec in codecs.items():
            for task, fn in (("encode", lambda c=codec: c.encode(x).tokens),
                             ("decode", lambda c=codec: c.decode(codes))):
                t = time.perf_counter()
                out[k, task] = fn()
                times[k, task].append(time.perf_counter() - t)
    rows = {f"{k} {task}": statistics.median(v[1:]) for (k, task), v in times.items()}
    parity = {"tokens_equal": float((out["whole", "encode"] == out["steps", "encode"]).mean()),
              "decode_max_abs": float(np.abs(out["whole", "decode"]
                                             - out["steps", "decode"]).max())}
    cpu = this_cpu().describe()
    print(f"{codecs['whole'].title} full size, {args.seconds:g} s, {args.threads} threads, "
          f"median of {args.repeats}; {cpu}")
    for k, f in facts.items():
        print(f"{k}: export {f['export_s'] or float('nan'):.0f} s, {f['mib']:.0f} MiB")
    for task in ("encode", "decode"):
        w, s = rows[f"whole {task}"], rows[f"steps {task}"]
        print(f"{task}: whole-input graph {w:.2f} s, step graphs {s:.2f} s ({s / w:.2f}x)")
    print(f"parity: {parity}")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "exports": facts, "rows": rows,
                                         "parity": parity, "args": {
                                             "seconds": args.seconds, "threads": args.threads,
                                             "repeats": args.repeats}}, indent=1))


if __name__ == "__main__":
    main()
