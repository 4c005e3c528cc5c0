"""DAC encode and decode speed, full size, float32: audiotok next to the `dac` package
(descript-audio-codec 1.0.0) and transformers' DacModel, the same random weights, interleaved in
one run; the median time of each, the real-time factor and the extra resident memory of the
call.

    pip install --no-deps descript-audio-codec==1.0.0   # (and argbind; see .ci/run)
    python benchmarks/dac_speed.py --threads 2 --durations 10,60 --config 44khz

All get whole frames (so all compute the same codes, which is checked) and run under
torch.inference_mode; the dac package through its encode/decode (preprocess, then the
quantizer's from_codes for decoding), transformers through DacModel.encode/decode.
"""

from __future__ import annotations

import json
import sys

import torch
from common import ROOT, encode_decode_rounds, parser, report_rounds, speech

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from tests.models.dac import reference  # noqa: E402

CONFIGS = {"44khz": reference.FULL_44, "24khz": reference.FULL_24}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    p.add_argument("--config", choices=sorted(CONFIGS), default="44khz")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    kwargs = CONFIGS[args.config]
    ref = reference.dac_model(kwargs)
    hf = reference.hf_model(ref, kwargs)
    path = reference.save_pth(ref, kwargs, args.workdir / f"dac_{args.config}_full")
    ours = audiotok.load(path)
    rate, hop = ours.sample_rate, ours.samples_per_frame
    rows = []
    for seconds in [float(s) for s in args.durations.split(",")]:
        n = int(seconds * rate) // hop * hop
        x = torch.from_numpy(speech(n / rate, rate))[None, None].float()
        impls = {
            "audiotok": (lambda x=x: ours.encode(x[0], rate).tokens, lambda c: ours.decode(c)),
            "dac 1.0.0": (lambda x=x: ref.encode(x)[1],
                          lambda c: ref.decode(ref.quantizer.from_codes(c)[0])),
            "transformers": (lambda x=x: hf.encode(x).audio_codes,
                             lambda c: hf.decode(audio_codes=c).audio_values),
        }
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(impls, args.repeats)
        same = all(torch.equal(codes["audiotok"], c) for c in codes.values())
        report_rounds(rows, times, memory, same, n / rate, seconds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
