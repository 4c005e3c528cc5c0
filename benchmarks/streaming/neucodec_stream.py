"""NeuCodec streaming decode, two schedules on the same tokens, against offline decode of all
of them: the serving engine's windowed re-decoding (codec.streaming.window, or --window) and
NeuTTS's (neutts 1.4.1: 25-frame chunks decoded with 50 frames before and 5 after, 27 frames
kept of each and cross-faded over 2 frames with EnCodec's triangular overlap-add; the tail
decoded once). NeuCodec attends to the whole input, so neither is exact.

    python benchmarks/streaming/neucodec_stream.py --seconds 20 --threads 2

Tokens: the shipped speech sample (looped to --seconds, 16 kHz) encoded by the model (default:
the full-size configuration with random weights, written once to --workdir; --model takes a
real checkpoint). Reported: SNR and max abs difference against offline decode, the length
(offline: 480 samples a frame), frames decoded per frame output, frames before first audio.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser, speech
from xcodec2_stream_windows import snr_db, stream_decode

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.server import WindowSettings  # noqa: E402
from tests.models.neucodec import reference  # noqa: E402

# neutts 1.4.1 NeuTTS.__init__: streaming_frames_per_chunk, _lookforward, _lookback, _overlap
CHUNK, AHEAD, BACK, OVERLAP = 25, 5, 50, 1


def crossfade(pieces: list[np.ndarray], stride: int) -> np.ndarray:
    """Triangular overlap-add (EnCodec's linear_overlap_add, as neutts uses it): piece i at
    i * stride, weighted by 0.5 - |t - 0.5| on an open grid, normalised by the weight sum."""
    total = max(stride * i + p.size for i, p in enumerate(pieces))
    out, weight = np.zeros(total), np.zeros(total)
    for i, p in enumerate(pieces):
        t = np.linspace(0, 1, p.size + 2)[1:-1]
        w = 0.5 - np.abs(t - 0.5)
        out[i * stride : i * stride + p.size] += w * p
        weight[i * stride : i * stride + p.size] += w
    return out / weight


def neutts_stream(decode, tokens: torch.Tensor, hop: int) -> tuple[np.ndarray, int]:
    """NeuTTS's streaming schedule over tokens [1, T] that arrive one by one (no reference
    codes before them): a chunk is decoded once CHUNK + AHEAD tokens past the last one are in.
    Returns the audio and the frames decoded."""
    total, n, pieces, out, emitted, decoded = tokens.shape[-1], 0, [], [], 0, 0
    stride = CHUNK * hop
    while total - n >= CHUNK + AHEAD:  # the check runs as each token arrives
        first = max(n - BACK - OVERLAP, 0)
        window = tokens[..., first : n + CHUNK + AHEAD]  # what has arrived by then
        start = (n - first) * hop
        pieces.append(decode(window)[start : start + (CHUNK + 2 * OVERLAP) * hop])
        decoded += window.shape[-1]
        end = len(pieces) * stride
        out.append(crossfade(pieces, stride)[emitted:end])
        emitted, n = end, n + CHUNK
    if total > n:  # the tail, once every token is in
        rest = total - n
        first = max(total - (BACK + OVERLAP + rest), 0)
        start = (total - first - rest - OVERLAP) * hop
        pieces.append(decode(tokens[..., first:])[start:])
        decoded += total - first
        out.append(crossfade(pieces, stride)[emitted:])
    return np.concatenate(out), decoded


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", help="checkpoint (default: random full-size weights)")
    p.add_argument("--window", default=None, help="left,chunk,lookahead (default: the codec's)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        path = args.workdir / "neucodec_full" / "pytorch_model.bin"
        if not path.exists():
            reference.save_package(reference.package_model(reference.FULL), path.parent)
        args.model = str(path)
    codec = audiotok.load(args.model)
    hop = codec.samples_per_frame
    tokens = codec.encode(speech(args.seconds, codec.input_rate), codec.input_rate).tokens[0]
    frames = tokens.shape[-1]
    offline = codec.decode(tokens[None])[0, 0].numpy()
    window = WindowSettings(*(int(v) for v in args.window.split(","))) if args.window \
        else WindowSettings(codec.streaming.window.left, codec.streaming.window.chunk,
                            codec.streaming.window.lookahead)
    ours, ours_decoded = stream_decode(codec, tokens, window)
    theirs, theirs_decoded = neutts_stream(lambda t: codec.decode(t[None])[0, 0].numpy(),
                                           tokens, hop)
    rows = []
    print(f"{frames} frames; offline decode: {offline.size} samples")
    print("| schedule | SNR dB | max abs | samples | decoded/output | frames before first "
          "audio |")
    print("|---|---|---|---|---|---|")
    for name, audio, decoded, first in (
            (f"audiotok engine {window.left},{window.chunk},{window.lookahead}", ours,
             ours_decoded, window.chunk + window.lookahead),
            ("neutts 1.4.1", theirs, theirs_decoded, CHUNK + AHEAD)):
        n = min(audio.size, offline.size)
        row = {"schedule": name, "snr_db": snr_db(offline[:n], audio[:n]),
               "max_abs": float(np.abs(offline[:n] - audio[:n]).max()), "samples": audio.size,
               "decoded_per_output": decoded / frames, "first_audio_frames": first}
        rows.append(row)
        print(f"| {name} | {row['snr_db']:.1f} | {row['max_abs']:.3f} | {audio.size} | "
              f"{row['decoded_per_output']:.2f} | {first} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
