"""SNAC encode and decode speed, full size, float32: audiotok next to the `snac` 1.2.1 package,
the same random weights, interleaved in one run; the median time of each, the real-time factor
and the extra resident memory of the call.

    pip install snac==1.2.1
    python benchmarks/snac_speed.py --threads 2 --durations 10,60 --config 24khz

Both get whole frames (2048 samples at 24 kHz, 12288 at 32 kHz, so both compute the same
tokens, which is checked) and run under torch.inference_mode, each with its own noise (the
package draws torch's global generator; audiotok's default seeded noise).
"""

from __future__ import annotations

import json
import sys

import torch
from common import ROOT, encode_decode_rounds, parser, report_rounds, speech

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.models.snac.model import levels_to_rows, rows_to_levels  # noqa: E402
from tests.models.snac import reference  # noqa: E402

CONFIGS = {"24khz": reference.FULL_24, "32khz": reference.FULL_32}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    p.add_argument("--config", choices=sorted(CONFIGS), default="24khz")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    config = CONFIGS[args.config]
    ref = reference.snac_model(config)
    folder = reference.save(ref, config, args.workdir / f"snac_{args.config}_full")
    ours = audiotok.load(folder)
    rate, pad = config["sampling_rate"], ours.samples_per_frame * ours.streaming.window.align
    rows = []
    for seconds in [float(s) for s in args.durations.split(",")]:
        n = int(seconds * rate) // pad * pad
        x = torch.from_numpy(speech(n / rate, rate))[None, None].float()
        impls = {
            "audiotok": (lambda x=x: ours.encode(x[0], rate).tokens, lambda c: ours.decode(c)),
            "snac 1.2.1": (lambda x=x: levels_to_rows(ref.encode(x), ours.config),
                           lambda c: ref.decode(rows_to_levels(c, ours.config))),
        }
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(impls, args.repeats)
        same = torch.equal(codes["audiotok"], codes["snac 1.2.1"])
        report_rounds(rows, times, memory, same, n / rate, seconds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
