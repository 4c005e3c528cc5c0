"""NeuCodec encode and decode speed, full size, float32: audiotok next to the neucodec package
(0.0.6, from .refs/neucodec: see .ci/run) and transformers' NeuCodecModel, the same random
weights, interleaved in one run; the median time of each, the real-time factor and the extra
resident memory of the call; the codes checked equal and the largest decode difference.
--distill: DistillNeuCodec against the package (transformers has no DistillNeuCodec).

    python benchmarks/neucodec_speed.py --threads 2 --durations 10,60
    python benchmarks/neucodec_speed.py --threads 2 --durations 10,60 --distill

transformers' own feature extractor computes its fbank with torchaudio, which does not run
with this torch; its encode is timed with audiotok's features (computed inside the timed call),
which equal the package's numpy extractor's.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from common import ROOT, encode_decode_rounds, parser, report_rounds, speech

sys.path.insert(0, str(ROOT))
import dataclasses  # noqa: E402

import audiotok  # noqa: E402
from audiotok.models.xcodec2.features import semantic_features  # noqa: E402
from tests.models.neucodec import reference  # noqa: E402


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    p.add_argument("--whole", action="store_true",
                   help="audiotok encodes inputs over 30 s whole, as the references do (default: "
                        "in windows with 3 s of context, codec.streaming.long_window)")
    p.add_argument("--distill", action="store_true", help="DistillNeuCodec")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.distill:
        ref = reference.distill_package_model(reference.DISTILL_FULL)
        path = args.workdir / "distill_neucodec_full" / "pytorch_model.bin"
    else:
        ref = reference.package_model(reference.FULL)
        path = args.workdir / "neucodec_full" / "pytorch_model.bin"
    if not path.exists():
        reference.save_package(ref, path.parent)
    ours = audiotok.load(path)
    hf = None if args.distill else reference.hf_model(ours)
    if args.whole:
        ours.streaming = dataclasses.replace(ours.streaming, long_window=None)

    def hf_encode(x):
        p = (x.shape[-1] // 320 + 1) * 320
        padded = torch.nn.functional.pad(x[0], (0, p - x.shape[-1]))
        features, _ = semantic_features(padded, torch.tensor([p]), 320, 16000, centre=False)
        return hf.encode(padded[:, None], features).audio_codes

    rows = []
    for seconds in [float(s) for s in args.durations.split(",")]:
        x = torch.from_numpy(speech(seconds, 16000))[None, None].float()
        impls = {
            "audiotok": (lambda x=x: ours.encode(x[0, 0], 16000).tokens, ours.decode),
            "neucodec 0.0.6": (lambda x=x: ref.encode_code(x), ref.decode_code),
        }
        if hf is not None:
            impls["transformers"] = (lambda x=x: hf_encode(x),
                                     lambda c: hf.decode(audio_codes=c).audio_values)
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(impls, args.repeats)
            same = all(torch.equal(codes["audiotok"], c) for c in codes.values())
            report_rounds(rows, times, memory, same, seconds, seconds)
            ours_audio = ours.decode(codes["audiotok"])
            diff = max(float((ours_audio - dec(codes["audiotok"])).abs().max())
                       for name, (_, dec) in impls.items() if name != "audiotok")
        print(f"{seconds:5.1f} s: decoded audio within {diff:.1e} of the references "
              f"(rms {float(np.sqrt(np.mean(ours_audio.numpy() ** 2))):.3f})")
        rows.append({"seconds": seconds, "op": "decode difference", "max_abs": diff})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
