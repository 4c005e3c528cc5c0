"""EnCodec encode and decode speed, float32: audiotok next to the `encodec` package (0.1.1)
and transformers' EncodecModel, the same random weights, interleaved in one run; the median
time of each, the real-time factor and the extra resident memory of the call.

    pip install --no-deps encodec==0.1.1
    python benchmarks/encodec_speed.py --threads 2 --durations 10,60 --bandwidth 24
    python benchmarks/encodec_speed.py --variant 32khz --bandwidth 2.2   # MusicGen's
    python benchmarks/encodec_speed.py --variant 48khz --bandwidth 24    # stereo, segments
    python benchmarks/encodec_speed.py --variant 48khz --durations 10 --floor

--floor also profiles each encode: the time in its convolutions, LSTM and matrix products
alone against the whole (encode_floors).

The 32 kHz model is the package's modules with facebook/encodec_32khz's arguments
(tests/models/encodec/reference.py). The 48 kHz model encodes speech on both channels (the
left delayed by 7 ms), in 1 s segments; codes and scales checked equal.
All three encode whole frames of speech at --bandwidth (codes checked equal) and run under
torch.inference_mode.
"""

from __future__ import annotations

import json
import sys

import torch
from common import ROOT, encode_decode_rounds, parser, product_ms, report_rounds, speech

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.models.encodec import segments  # noqa: E402
from tests.models.encodec import reference  # noqa: E402


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    p.add_argument("--bandwidth", type=float, default=24.0)
    p.add_argument("--variant", choices=("24khz", "32khz", "48khz"), default="24khz")
    p.add_argument("--floor", action="store_true",
                   help="also time each encoder's convolutions, LSTM and products alone "
                        "(torch.profiler's self times)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ref = reference.encodec_model(variant=args.variant)
    hf = reference.hf_model(ref, {"32khz": reference.HF_32KHZ,
                                  "48khz": reference.HF_48KHZ}.get(args.variant))
    path = reference.save_th(ref, args.workdir / f"encodec_{args.variant}_full",
                             f"encodec_{args.variant}-test.th")
    ours = audiotok.load(path, bandwidth=str(args.bandwidth))
    ref.set_target_bandwidth(args.bandwidth)
    rate, hop = ours.sample_rate, ours.samples_per_frame
    rows = []
    for seconds in [float(s) for s in args.durations.split(",")]:
        n = int(seconds * rate) // hop * hop
        x = torch.from_numpy(speech(n / rate, rate))[None, None].float()
        if ours.channels == 1:
            impls = {
                "audiotok": (lambda x=x: ours.encode(x[0], rate).tokens,
                             lambda c: ours.decode(c)),
                "encodec 0.1.1": (lambda x=x: ref.encode(x)[0][0],
                                  lambda c: ref.decode([(c, None)])),
                "transformers": (lambda x=x: hf.encode(x, bandwidth=args.bandwidth)
                                 .audio_codes[0],
                                 lambda c: hf.decode(c[None], [None]).audio_values),
            }
        else:  # stereo in segments: the codes compared are (tokens, scales) as one tensor
            x = torch.cat([torch.roll(x, 336, -1), x], 1)
            layout = segments.frames_of(ours.config, n)
            impls = {"audiotok": (lambda x=x: _ours_48(ours, x[0], rate),
                                  lambda c, s=layout: ours.decode(_codes_48(c, s))),
                     "encodec 0.1.1": (lambda x=x: _package_48(ref.encode(x)),
                                       lambda c, s=layout: ref.decode(_frames_48(c, s))),
                     "transformers": (lambda x=x: _hf_48(hf.encode(x, bandwidth=args.bandwidth)),
                                      lambda c, s=layout: _hf_decode_48(hf, c, s))}
        with torch.inference_mode():
            times, memory, codes = encode_decode_rounds(impls, args.repeats)
        same = all(torch.equal(codes["audiotok"], c) for c in codes.values())
        report_rounds(rows, times, memory, same, n / rate, seconds)
        if args.floor:
            encode_floors(impls, seconds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def encode_floors(impls: dict, seconds: float) -> None:
    """Each implementation's encode: the time in its convolutions, LSTM and products alone,
    and in all operators, profiled (two calls each). The encoder's convolutions and LSTM are
    the references' own kernels in audiotok too (its codes depend on their rounding), so the
    faster reference's whole time over audiotok's products is the most any form of the rest
    could give."""
    with torch.inference_mode():
        got = {name: product_ms(enc, 2) for name, (enc, _) in impls.items()}
    for name, (products, every) in got.items():
        print(f"{seconds:5.1f} s encode {name:15s} products {products:6.0f} ms of {every:6.0f} ms "
              "(profiled)")
    best = min(every for name, (_, every) in got.items() if name != "audiotok")
    print(f"{seconds:5.1f} s encode: the faster reference's operators over audiotok's products "
          f"alone: {best / got['audiotok'][0]:.2f}x")


def _ours_48(codec, x, rate):
    codes = codec.encode(x, rate)
    return _joined(codes.tokens, codes.scales)


def _joined(tokens, scales):
    """tokens [1, K, T] and scales [1, S] as one tensor [1, K, T + S] (each row the scales)."""
    return torch.cat([tokens.float(), scales[:, None].expand(-1, tokens.shape[1], -1)], -1)


def _package_48(frames):
    return _joined(torch.cat([f[0] for f in frames], -1),
                   torch.stack([f[1].view(-1) for f in frames], 1))


def _hf_48(out):
    codes = torch.cat([c[..., : 150 - (out.last_frame_pad_length if i == len(out.audio_codes) - 1
                                      else 0)] for i, c in enumerate(out.audio_codes)], -1)
    return _joined(codes, torch.cat(list(out.audio_scales), 1))


def _split_48(c, layout):
    """(tokens [1, K, T], scales [1, S]) of a joined tensor of segments of `layout` frames."""
    frames = sum(layout)
    return c[:, :, :frames].long(), c[:, 0, frames:]


def _codes_48(c, layout):
    tokens, scales = _split_48(c, layout)
    return audiotok.Codes(tokens, torch.tensor([tokens.shape[-1]]), scales=scales)


def _frames_48(c, layout):
    """The package's encoded frames: (codes [1, K, T_s], scale [1, 1]) per segment."""
    tokens, scales = _split_48(c, layout)
    starts = [sum(layout[:i]) for i in range(len(layout))]
    return [(tokens[..., a : a + n], scales[:, i : i + 1])
            for i, (a, n) in enumerate(zip(starts, layout, strict=True))]


def _hf_decode_48(hf, c, layout):
    frames = _frames_48(c, layout)
    codes = torch.stack([torch.nn.functional.pad(t, (0, 150 - t.shape[-1])) for t, _ in frames])
    return hf.decode(codes, [s for _, s in frames],
                     last_frame_pad_length=150 - layout[-1]).audio_values


if __name__ == "__main__":
    main()
