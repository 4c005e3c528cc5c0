"""Mimi encode and decode speed, full size, float32: audiotok next to moshi 0.2.13
(NO_TORCH_COMPILE=1) and transformers' MimiModel, the same random weights, interleaved in one
run; the median time of each, the real-time factor and the extra resident memory of the call.

    pip install --no-deps moshi==0.2.13    # the reference (its metadata pins an old torch)
    python benchmarks/mimi_speed.py --threads 2 --seconds 10,60

Every implementation gets whole frames (so all three compute the same tokens, which is
checked), and runs with torch.inference_mode.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("NO_TORCH_COMPILE", "1")

import torch  # noqa: E402
from common import ROOT, encode_decode_rounds, parser, report_rounds, speech  # noqa: E402

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from tests.models.mimi import reference  # noqa: E402


def main() -> None:
    p = parser(__doc__)
    p.set_defaults(seconds=None)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    args.workdir.mkdir(parents=True, exist_ok=True)
    moshi = reference.moshi_model(small=False)
    moshi_file, hf_dir = reference.save_both(moshi, args.workdir / "mimi_full", small=False)
    hf = reference.hf_model(hf_dir)
    ours = audiotok.load(moshi_file)
    rows = []
    for seconds in [float(s) for s in args.durations.split(",")]:
        frames = int(seconds * 12.5)
        x = torch.from_numpy(speech(frames * 0.08, 24000))[None, None].float()
        impls = {
            "audiotok": (lambda x=x: ours.encode(x[0], 24000).tokens,
                         lambda c: ours.decode(c)),
            "moshi 0.2.13": (lambda x=x: moshi.encode(x), lambda c: moshi.decode(c)),
            "transformers 5.24": (lambda x=x: hf.encode(x).audio_codes,
                                  lambda c: hf.decode(c).audio_values),
        }
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(impls, args.repeats)
        # codes that differ from any reference's (a float32 tie between two distances can go
        # either way under other rounding: nn/linear.py, models/mimi/quantizer.py)
        differ = max(int((codes["audiotok"] != c).sum()) for c in codes.values())
        same = True if differ == 0 else f"{differ} of {codes['audiotok'].numel()} differ"
        report_rounds(rows, times, memory, same, seconds, seconds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
