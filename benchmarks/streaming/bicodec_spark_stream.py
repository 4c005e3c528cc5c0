"""BiCodec decode streams: audiotok's exact windowed stream (each window decodes 67 frames of
context each side, so every frame's audio is the offline decode's) against Spark-TTS's Triton
runtime chunking (runtime/triton_trtllm: chunks decoded independently, the first of 50 tokens,
each next 8 times longer up to 1500, 5 tokens of overlap, no left context, a linear cross-fade
of 1600 samples at each joint), side by side on the same codes: time per second of audio,
frames decoded per frame, first audio and each stream's difference from the offline decode.

    python benchmarks/streaming/bicodec_spark_stream.py --seconds 10 --threads 2

Codes: the shipped speech sample (looped to --seconds) encoded by the model. Default model: the
released size on random weights (written once to --workdir by benchmarks/codecs/compare.py
--codec bicodec, or here). Both streams run in this process, interleaved, medians of --repeats.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import interleaved, parser, speech, stream_row

import audiotok

FIRST, GROWTH, LONGEST, OVERLAP, FADE = 50, 8, 1500, 5, 1600  # Spark's Triton runtime's


def spark_chunks(total: int) -> list[tuple[int, int]]:
    """[start, end) of each chunk: the first FIRST tokens, then chunks GROWTH times longer (at
    most LONGEST), each starting OVERLAP tokens before the previous one's end."""
    spans, start, size = [], 0, FIRST
    while True:
        end = min(total, start + size)
        spans.append((start, end))
        if end == total:
            return spans
        start, size = end - OVERLAP, min(size * GROWTH, LONGEST)


def spark_stream(codec, codes, utterance) -> tuple[np.ndarray, int]:
    """Spark's chunking over codes [1, 1, T]: (audio, frames decoded)."""
    out, decoded = np.zeros(0, np.float32), 0
    ramp = np.linspace(0.0, 1.0, FADE, dtype=np.float32)
    for a, b in spark_chunks(codes.shape[-1]):
        piece = codec.decode(codes[..., a:b], globals=utterance)[0, 0].numpy()
        decoded += b - a
        if out.size:
            joint = out[-FADE:] * (1 - ramp) + piece[:FADE] * ramp
            out = np.concatenate([out[:-FADE], joint, piece[FADE:]])
        else:
            out = piece
    return out, decoded


def our_stream(codec, codes, utterance, push: int) -> np.ndarray:
    with codec.stream_decoder(globals=utterance) as dec:
        pieces = [dec.push(codes[..., a : a + push]) for a in range(0, codes.shape[-1], push)]
        pieces.append(dec.flush())
    return torch.cat(pieces, -1)[0, 0].numpy()


def our_schedule(frames: int, push: int, left: int, lookahead: int) -> tuple[int, int]:
    """(frames decoded, frames pushed before the first audio) of the library's windowed stream
    (every frame with `lookahead` frames after it goes out at each push, decoded with `left`
    frames before it; the rest at the end)."""
    decoded, emitted, first = 0, 0, None
    for now in range(push, frames + push, push):
        now = min(now, frames)
        ready = frames - emitted if now == frames else now - lookahead - emitted
        if ready > 0:
            decoded += min(frames, emitted + ready + lookahead) - max(0, emitted - left)
            emitted += ready
            first = now if first is None else first
    return decoded, first


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", help="a Spark-TTS model folder (default: released size, random "
                                   "weights)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    path = Path(args.model) if args.model else args.workdir / "bicodec_full"
    if not args.model and not (path / "BiCodec" / "model.safetensors").is_file():
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (tests/)
        from tests.models.bicodec import reference

        spec = reference.RELEASED
        reference.save_folder(reference.build(spec), reference.wav2vec2(spec), spec, path)
    codec = audiotok.load(path)
    encoded = codec.encode(speech(args.seconds, codec.sample_rate), codec.sample_rate)
    codes, utterance = encoded.tokens, encoded.globals
    offline = codec.decode(codes, globals=utterance)[0, 0].numpy()
    frames = codes.shape[-1]
    seconds = frames * codec.samples_per_frame / codec.sample_rate
    window = codec.streaming.window
    pushes = {"ours, 25 frames a push": 25, "ours, 100 frames a push": 100}
    runs = {"spark": lambda: spark_stream(codec, codes, utterance)[0],
            **{name: (lambda n=n: our_stream(codec, codes, utterance, n))
               for name, n in pushes.items()}}
    times, audio = interleaved(runs, args.repeats)
    _, spark_frames = spark_stream(codec, codes, utterance)
    rows = []
    for name in runs:
        if name == "spark":
            rows.append(stream_row(name, times[name], seconds, spark_frames / frames, FIRST,
                                   audio[name], offline))
            continue
        decoded, first = our_schedule(frames, pushes[name], window.left, window.lookahead)
        rows.append(stream_row(name, times[name], seconds, decoded / frames, first, audio[name],
                               offline))
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "seconds": seconds,
                                         "model": str(path), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
