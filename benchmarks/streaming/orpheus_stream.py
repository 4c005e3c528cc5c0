"""Streaming SNAC 24 kHz the way Orpheus TTS does, next to audiotok's windowed stream decoder:
full-size random weights, noise off on both sides (so that every difference is the method's),
float32, one frame (7 ids) pushed at a time as the language model emits them.

    pip install snac==1.2.1
    python benchmarks/streaming/orpheus_stream.py --threads 2 --seconds 10

The Orpheus rule is re-implemented from orpheus_tts/decoder.py (commit 835ac7c): once a frame
completes and more than 27 ids are in, decode the last 4 frames with the snac package and keep
samples 2048:4096 (the second frame of the window); its int16 conversion is left out. audiotok
runs `codec.stream_decoder()` (stateful: each frame decoded once, samples out as they become
final) and `codec.stream_decoder(window=(left, lookahead))` with the exact window (3, 3) and
shorter ones. Reported per method: the largest difference from the offline decode of the whole
sequence (and relative to the signal's rms), samples never emitted, coarse frames decoded per
frame emitted, decode milliseconds per 2048 samples emitted (median over the pushes that
emitted), and the first audio: ids needed and that first decode's milliseconds.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser, speech

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402
from audiotok.models.snac.model import rows_to_levels  # noqa: E402
from tests.models.snac import reference  # noqa: E402

SPF, IDS = 2048, 7  # samples and ids of a coarse frame


def orpheus_rule(model, tokens: torch.Tensor, cfg) -> dict:
    """Orpheus's decoder loop on frames arriving one by one."""
    chunks, work, times, first = [], 0, [], None
    for f in range(tokens.shape[-1]):
        count = IDS * (f + 1)
        if count % 7 or count <= 27:
            continue
        window = tokens[..., f - 3 : f + 1]
        t = time.perf_counter()
        with torch.inference_mode():
            audio = model.decode(rows_to_levels(window, cfg))
        times.append(time.perf_counter() - t)
        chunks.append(((f - 2) * SPF, audio[0, 0, SPF : 2 * SPF]))
        work += 4
        first = first or (count, times[-1])
    return {"chunks": chunks, "work": work, "times": times, "first": first}


def ours(codec, tokens: torch.Tensor, window) -> dict:
    """audiotok's stream decoder, one frame pushed at a time: windowed (window = (left,
    lookahead), frames decoded per window counted) or stateful (window None: one frame each)."""
    chunks, work, times, first, emitted = [], 0, [], None, 0
    frames = tokens.shape[-1]
    with codec.stream_decoder(window=window) as dec:
        for f in range(frames + 1):
            t = time.perf_counter()
            audio = dec.flush() if f == frames else dec.push(tokens[..., f : f + 1])
            seconds = time.perf_counter() - t
            n = audio.shape[-1]
            if not n:
                continue
            chunks.append((emitted, audio[0, 0]))
            if window is None:
                work = frames
            else:
                left, lookahead = window
                done = emitted // SPF
                work += min(frames, done + n // SPF + lookahead) - max(0, done - left)
            if f < frames:
                times.append(seconds * SPF / n)
            first = first or (IDS * (f + 1), seconds)
            emitted += n
    return {"chunks": chunks, "work": work, "times": times, "first": first}


def report(name: str, run: dict, whole: torch.Tensor, frames: int) -> dict:
    covered = torch.zeros(whole.shape[-1], dtype=torch.bool)
    diff = 0.0
    for start, audio in run["chunks"]:
        covered[start : start + audio.shape[-1]] = True
        diff = max(diff, float((audio - whole[start : start + audio.shape[-1]]).abs().max()))
    lost = int((~covered).sum())
    row = {"method": name, "max_abs_diff": diff, "diff_over_rms": diff / float(whole.std()),
           "samples_lost": lost, "frames_decoded_per_frame": run["work"] / (
               (whole.shape[-1] - lost) / SPF),
           "ms_per_frame": 1000 * statistics.median(run["times"]),
           "first_audio_ids": run["first"][0], "first_decode_ms": 1000 * run["first"][1]}
    print(f"{name:26s} max |diff| {diff:8.2e} ({row['diff_over_rms']:8.2e} of rms)  "
          f"lost {lost:6d} samples  {row['frames_decoded_per_frame']:4.2f} frames and "
          f"{row['ms_per_frame']:6.1f} ms decoded per frame  first audio after "
          f"{row['first_audio_ids']} ids + {row['first_decode_ms']:.0f} ms")
    return row


def main() -> None:
    p = parser(__doc__)
    p.set_defaults(seconds=10.0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    args.workdir.mkdir(parents=True, exist_ok=True)
    ref = reference.snac_model(reference.FULL_24)
    reference.noise_off(ref)
    folder = reference.save(ref, reference.FULL_24, args.workdir / "snac_24khz_full")
    codec = audiotok.load(folder, noise="off")
    cfg = codec.config
    x = torch.from_numpy(speech(args.seconds, 24000))
    tokens = codec.encode(x, 24000).tokens
    frames = tokens.shape[-1]
    whole = codec.decode(tokens)[0, 0]
    with torch.inference_mode():
        ref_whole = ref.decode(rows_to_levels(tokens, cfg))[0, 0]
    print(f"{frames} frames ({frames * SPF / 24000:.2f} s); offline decode vs the snac package: "
          f"max |diff| {float((whole - ref_whole).abs().max()):.1e}")
    rows = []
    for _ in range(args.repeats):
        rows = [report("orpheus (1 left, 2 right)", orpheus_rule(ref, tokens, cfg), whole,
                       frames)]
        rows.append(report("audiotok stateful (default)", ours(codec, tokens, None), whole,
                           frames))
        for window in ((3, 3), (2, 2), (1, 2), (1, 1)):
            rows.append(report(f"audiotok window {window[0]}/{window[1]}",
                               ours(codec, tokens, window), whole, frames))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
