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
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import parser, speech

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


def snr(x: np.ndarray, ref: np.ndarray) -> float:
    noise = np.sum((x - ref) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref**2) / noise))


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
    times: dict[str, list[float]] = {k: [] for k in runs}
    audio = {}
    for _ in range(args.repeats):  # interleaved
        for name, run in runs.items():
            t = time.perf_counter()
            audio[name] = run()
            times[name].append(time.perf_counter() - t)
    _, kani_frames = kani_stream(codec, codes)
    frames = codes.shape[-1]
    rows = []
    for name in runs:
        a = audio[name]
        assert a.shape == offline.shape, (name, a.shape, offline.shape)
        kani = name == "kani"
        rows.append({
            "stream": name, "median_s": float(np.median(times[name])),
            "seconds_per_audio_second": float(np.median(times[name])) / seconds,
            "frames_decoded_per_frame": kani_frames / frames if kani else 1.0,
            "first_audio_frames": CHUNK if kani else (CHUNK if "25" in name else 1),
            "max_abs_diff": float(np.abs(a - offline).max()), "snr_db": snr(a, offline)})
        print(f"{name:24s} {rows[-1]['median_s']:6.2f} s for {seconds:.1f} s of audio  "
              f"{rows[-1]['frames_decoded_per_frame']:.2f} frames decoded a frame  first audio "
              f"after {rows[-1]['first_audio_frames']} frames  max |diff| "
              f"{rows[-1]['max_abs_diff']:.2e}  SNR {rows[-1]['snr_db']:.1f} dB")
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "seconds": seconds,
                                         "model": str(path), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
