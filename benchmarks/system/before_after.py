"""Two source trees side by side: every family's encode, decode and 1-frame stream push, timed
from each tree in turn on the same machine (a change's speed, before against after).

    python benchmarks/system/before_after.py --make   # the full-size random models
    git worktree add /tmp/before <commit>
    python benchmarks/system/before_after.py --before /tmp/before --after . --threads 2

Each measurement runs in a fresh process with the tree's `src` first on the path; the trees
alternate model by model for --rounds rounds, and the medians are compared (after / before:
below 1 is faster). Models are full-size configurations with random weights, built once into
--workdir by the families' test reference builders.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, median_time, parser

MODELS = ("s2", "xcodec2", "mimi", "snac", "dac", "encodec", "qwen3_tts", "neucodec",
          "distill_neucodec")


def make(workdir: Path) -> None:
    """Write each family's full-size random model where `models()` finds it."""
    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT))
    import audiotok

    paths = models(workdir)
    torch.manual_seed(0)
    from models import random_mimi, random_weights

    random_weights("s2", workdir)
    random_weights("xcodec2", workdir)
    if not paths["mimi"].exists():

        random_mimi().save_pretrained(paths["mimi"])
    if not paths["snac"].exists():
        from tests.models.snac import reference

        reference.save(reference.snac_model(reference.FULL_24), reference.FULL_24,
                       paths["snac"])
    if not paths["dac"].exists():
        from tests.models.dac import reference

        reference.save_pth(reference.dac_model(reference.FULL_44), reference.FULL_44,
                           paths["dac"].parent)
    if not paths["encodec"].exists():
        from tests.models.encodec import reference

        reference.save_th(reference.encodec_model(variant="24khz"), paths["encodec"].parent,
                          paths["encodec"].name)
    if not (paths["qwen3_tts"] / "model.safetensors").exists():
        work = paths["qwen3_tts"].parent
        work.mkdir(parents=True, exist_ok=True)
        np.savez(work / "none.npz", empty=np.zeros(0))
        env = {**os.environ, "PYTHONPATH": str(ROOT / ".refs" / "qwen-tts")}
        subprocess.run([sys.executable, str(ROOT / "tests/models/qwen3_tts/reference_run.py"),
                        str(work), "full", "0", str(work / "none.npz")], check=True, env=env)
    for name, full in (("neucodec", "FULL"), ("distill_neucodec", "DISTILL_FULL")):
        if not paths[name].exists():
            from tests.models.neucodec import reference

            build = reference.package_model if name == "neucodec" else \
                reference.distill_package_model
            reference.save_package(build(getattr(reference, full)), paths[name].parent)
    for name, path in paths.items():
        audiotok.load(path)  # each loads
        print(f"{name}: {path}")


def models(workdir: Path) -> dict[str, Path]:
    return {
        "s2": workdir / "s2-pro-random" / "codec.pth",
        "xcodec2": workdir / "xcodec2-random",
        "mimi": workdir / "ab" / "mimi",
        "snac": workdir / "ab" / "snac_24khz",
        "dac": workdir / "ab" / "dac_44khz" / "weights.pth",
        "encodec": workdir / "ab" / "encodec_24khz" / "encodec_24khz-test.th",
        "qwen3_tts": workdir / "ab" / "qwen3_tts" / "model",
        "neucodec": workdir / "ab" / "neucodec" / "pytorch_model.bin",
        "distill_neucodec": workdir / "ab" / "distill_neucodec" / "pytorch_model.bin",
    }


def measure(path: str, seconds: float, repeats: int, pushes: int) -> dict:
    """This process's tree: encode and decode of `seconds` of audio (medians of `repeats`), a
    1-frame stream push (median of `pushes` after as many warm ones), in seconds."""
    import time

    import torch

    import audiotok
    from audiotok.bench import test_signal
    from audiotok.errors import AudiotokError

    codec = audiotok.load(path)
    x = torch.from_numpy(test_signal(seconds, codec.input_rate, 1)[0])

    out = {"encode": median_time(lambda: codec.encode(x, codec.input_rate), repeats)[0]}
    codes = codec.encode(x, codec.input_rate)
    out["decode"] = median_time(lambda: codec.decode(codes), repeats)[0]
    try:
        dec = codec.stream_decoder()
    except AudiotokError:
        return out
    tokens = codes.tokens
    with dec:
        for f in range(pushes):  # warm: past every layer's start
            dec.push(tokens[..., f % tokens.shape[-1] : f % tokens.shape[-1] + 1])
        times = []
        for f in range(pushes, 2 * pushes):
            t = time.perf_counter()
            dec.push(tokens[..., f % tokens.shape[-1] : f % tokens.shape[-1] + 1])
            times.append(time.perf_counter() - t)
    out["push"] = statistics.median(times)
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--make", action="store_true", help="build the models, then stop")
    p.add_argument("--before", type=Path, help="the tree before the change")
    p.add_argument("--after", type=Path, default=ROOT, help="the tree after it")
    p.add_argument("--models", default=",".join(MODELS))
    p.set_defaults(seconds=5.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--pushes", type=int, default=16)
    p.add_argument("--child", nargs=2, help=argparse_suppress())
    args = p.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(measure(args.child[1], args.seconds, args.repeats, args.pushes)))
        return
    if args.make:
        return make(args.workdir)
    paths = models(args.workdir)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict = {}
    for name in args.models.split(","):
        for _ in range(args.rounds):
            for side, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree / "src")}
                run = subprocess.run(
                    [sys.executable, __file__, "--child", name, str(paths[name]), "--threads",
                     str(args.threads), "--seconds", str(args.seconds), "--repeats",
                     str(args.repeats), "--pushes", str(args.pushes)],
                    env=env, capture_output=True, text=True, check=True)
                row = json.loads(run.stdout.strip().splitlines()[-1])
                for task, s in row.items():
                    results.setdefault(name, {}).setdefault(task, {}).setdefault(side, []).append(s)
        report = {task: {"before_ms": round(1e3 * statistics.median(v["before"]), 2),
                         "after_ms": round(1e3 * statistics.median(v["after"]), 2),
                         "ratio": round(statistics.median(v["after"]) /
                                        statistics.median(v["before"]), 3)}
                  for task, v in results[name].items()}
        print(name, json.dumps(report), flush=True)
        results[name]["summary"] = report
    if args.json:
        args.json.write_text(json.dumps({n: r["summary"] for n, r in results.items()}, indent=1)
                             + "\n")


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
