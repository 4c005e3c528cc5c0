"""GPU figures in one short run: encode and decode throughput at batch 1 and 16, eager and with
CUDA graphs, float32 and bfloat16, for both codecs, and the S2 streaming decoder's time per
pushed frame. Full-size models with random weights built on the GPU (no files needed).

    python benchmarks/gpu.py --seconds 10 --json gpu.json

Prints a table (audiotok bench's columns; device "cuda+graphs" for graph runs), which shapes
fell back to eager execution and why, and checks that graph runs give the eager tokens.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from audiotok import bench
from audiotok.models.s2.codec import S2Codec
from audiotok.models.s2.config import S2_PRO
from audiotok.models.s2.model import S2Model
from audiotok.models.xcodec2.codec import XCodec2Codec
from audiotok.models.xcodec2.config import XCodec2Config
from audiotok.models.xcodec2.model import XCodec2Model

BUILD = {"s2": (lambda: S2Model(S2_PRO), S2Codec),
         "xcodec2": (lambda: XCodec2Model(XCodec2Config()), XCodec2Codec)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--codecs", default="s2,xcodec2")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--batches", default="1,16")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu.py needs a CUDA device")
    batches = [int(b) for b in args.batches.split(",")]
    rows, fallbacks, checks = [], {}, {}
    for name in args.codecs.split(","):
        make_model, codec_class = BUILD[name]
        torch.manual_seed(0)
        t = time.perf_counter()
        with torch.device("cuda"):
            model = make_model()
        print(f"{name}: built in {time.perf_counter() - t:.1f} s", flush=True)
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            tokens = {}
            for graphs in (False, True):
                codec = codec_class(model, device="cuda", dtype=dtype, cuda_graphs=graphs)
                t = time.perf_counter()
                rows += bench.run(codec, [args.seconds], batches, args.repeats,
                                  stream=codec.causal and not graphs)
                x = torch.from_numpy(bench.test_signal(args.seconds, codec.sample_rate, 2))
                tokens[graphs] = codec.encode(x[:, None]).tokens
                label = f"{name} {dtype_name} {'graphs' if graphs else 'eager'}"
                print(f"{label}: {time.perf_counter() - t:.1f} s", flush=True)
                if graphs:
                    fallbacks[label] = {k: dict((str(s), why) for s, why in c.failed.items())
                                        for k, c in codec.graphs.items() if c.failed}
            checks[f"{name} {dtype_name}"] = bool(torch.equal(tokens[False], tokens[True]))
        del model, codec
        torch.cuda.empty_cache()
    print(bench.table(rows))
    print("graph tokens equal eager tokens:", checks)
    print("eager fallbacks:", json.dumps(fallbacks, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                         "torch": torch.__version__,
                                         "rows": bench.as_dicts(rows), "tokens_equal": checks,
                                         "fallbacks": fallbacks}, indent=1) + "\n")


if __name__ == "__main__":
    main()
