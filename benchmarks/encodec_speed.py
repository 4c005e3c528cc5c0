"""EnCodec encode and decode speed, float32: audiotok next to the `encodec` package (0.1.1)
and transformers' EncodecModel, the same random weights, interleaved in one run; the median
time of each, the real-time factor and the extra resident memory of the call.

    pip install --no-deps encodec==0.1.1
    python benchmarks/encodec_speed.py --threads 2 --durations 10,60 --bandwidth 24
    python benchmarks/encodec_speed.py --variant 32khz --bandwidth 2.2   # MusicGen's

The 32 kHz model is the package's modules with facebook/encodec_32khz's arguments
(tests/models/encodec/reference.py).
All three encode whole frames of speech at --bandwidth (codes checked equal) and run under
torch.inference_mode.
"""

from __future__ import annotations

import json
import sys

import torch
from common import ROOT, encode_decode_rounds, parser, report_rounds, speech

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from tests.models.encodec import reference  # noqa: E402


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    p.add_argument("--bandwidth", type=float, default=24.0)
    p.add_argument("--variant", choices=("24khz", "32khz"), default="24khz")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ref = reference.encodec_model(variant=args.variant)
    hf = reference.hf_model(ref, reference.HF_32KHZ if args.variant == "32khz" else None)
    path = reference.save_th(ref, args.workdir / f"encodec_{args.variant}_full",
                             f"encodec_{args.variant}-test.th")
    ours = audiotok.load(path, bandwidth=str(args.bandwidth))
    ref.set_target_bandwidth(args.bandwidth)
    rate, hop = ours.sample_rate, ours.samples_per_frame
    rows = []
    for seconds in [float(s) for s in args.durations.split(",")]:
        n = int(seconds * rate) // hop * hop
        x = torch.from_numpy(speech(n / rate, rate))[None, None].float()
        impls = {
            "audiotok": (lambda x=x: ours.encode(x[0], rate).tokens, lambda c: ours.decode(c)),
            "encodec 0.1.1": (lambda x=x: ref.encode(x)[0][0],
                              lambda c: ref.decode([(c, None)])),
            "transformers": (lambda x=x: hf.encode(x, bandwidth=args.bandwidth).audio_codes[0],
                             lambda c: hf.decode(c[None], [None]).audio_values),
        }
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(impls, args.repeats)
        same = all(torch.equal(codes["audiotok"], c) for c in codes.values())
        report_rounds(rows, times, memory, same, n / rate, seconds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
