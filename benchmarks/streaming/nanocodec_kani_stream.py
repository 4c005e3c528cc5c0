"""NanoCodec decode streams: audiotok's exact stream (every layer keeps its state, each frame
decoded once) against Kani-TTS's own streaming (kani-tts examples/basic/audio/streaming.py:
every 25 new frames, re-decode from 15 frames back and keep the new 25), side by side on the
same codes: time per second of audio, frames decoded per frame, first audio, and each stream's
difference from the offline decode.

    python benchmarks/streaming/nanocodec_kani_stream.py --seconds 10 --threads 2

Codes: the shipped speech sample (looped to --seconds) encoded by the model. Default model: the
released 0.6 kbps size on random weights (written once to --workdir); --model takes a real
.nemo where one is available. Both streams run in this process, interleaved, medians of
--repeats.
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

CHUNK, LOOKBACK = 25, 15  # Kani-TTS's CHUNK_SIZE and LOOKBACK_FRAMES


def kani_stream(codec, codes: torch.Tensor) -> tuple[np.ndarray, int]:
    """Kani-TTS's schedule over `codes` [1, 4, T] as its tokens arrive: (audio, frames decoded)."""
    total, done, decoded, chunks = codes.shape[-1], 0, 0, []
    spf = codec.samples_per_frame

    def window(start: int, end: int) -> np.ndarray:
        nonlocal decoded
        decoded += end - start
        return codec.decode(codes[..., start:end])[0, 0].numpy()

    for now in range(1, total + 1):  # a frame's 4 tokens have come
        if now - done >= CHUNK:
            start = max(0, done - LOOKBACK)
            audio = window(start, now)
            skip = min(done, LOOKBACK) * spf
            chunks.append(audio[skip : skip + CHUNK * spf])
            done += CHUNK
    if total > done:  # end of speech: the rest, with the same lookback
        start = max(0, done - LOOKBACK)
        chunks.append(window(start, total)[min(done, LOOKBACK) * spf :])
    return np.concatenate(chunks), decoded


def our_stream(codec, codes: torch.Tensor, push: int) -> np.ndarray:
    with codec.stream_decoder() as dec:
        pieces = [dec.push(codes[..., a : a + push]) for a in range(0, codes.shape[-1], push)]
        pieces.append(dec.flush())
    return torch.cat(pieces, -1)[0, 0].numpy()


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", help="a NanoCodec .nemo (default: released size, random weights)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model:
        path = Path(args.model)
    else:
        path = args.workdir / "nanocodec_full" / "nanocodec.nemo"
        if not path.is_file():
            sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (tests/)
            from tests.models.nanocodec import reference

            reference.save_nemo(reference.Codec(reference.FULL), reference.FULL, path)
    codec = audiotok.load(path)
    codes = codec.encode(speech(args.seconds, codec.sample_rate), codec.sample_rate).tokens
    offline = codec.decode(codes)[0, 0].numpy()
    seconds = codes.shape[-1] * codec.samples_per_frame / codec.sample_rate
    runs = {"kani": lambda: kani_stream(codec, codes)[0],
            "ours, 1 frame a push": lambda: our_stream(codec, codes, 1),
            "ours, 25 frames a push": lambda: our_stream(codec, codes, CHUNK)}
    times, audio = interleaved(runs, args.repeats)
    _, kani_frames = kani_stream(codec, codes)
    frames = codes.shape[-1]
    rows = []
    for name in runs:
        kani = name == "kani"
        rows.append(stream_row(name, times[name], seconds,
                               kani_frames / frames if kani else 1.0,
                               CHUNK if kani or "25" in name else 1, audio[name], offline))
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "seconds": seconds,
                                         "model": str(path), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
