"""S2 streaming decode: audiotok's exact incremental decoder next to s2.cpp's windowed re-decode
schedule (spec section 8), on the full-size S2 Pro configuration with random weights.

    python benchmarks/streaming/s2_streaming.py --threads 2
    python benchmarks/streaming/s2_streaming.py --rss-minutes 30 --rss-only   # peak RSS (slow)

Reports, in one run: time per pushed frame (1- and 4-frame pushes), offline decode time per
frame, s2.cpp's time per emitted frame at steady state (default and low-latency presets), and
first-audio latency. s2.cpp decodes every window afresh, so its steady-state cost is the cost of
one window decode divided by the frames that step emits; the schedule itself is simulated to
count decoded frames per emitted frame.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import median_time, parser, peak_rss_mb
from models import random_weights


@dataclass
class Preset:
    name: str
    stride: int  # frames generated between decode attempts
    context: int  # C: history frames re-decoded before the first new frame
    holdback: int  # H: newest frames decoded but not emitted


PRESETS = [Preset("s2.cpp streaming default", 4, 144, 144),
           Preset("s2.cpp low-latency", 1, 144, 0)]


class Schedule:
    """s2.cpp's decode_window_and_emit bookkeeping (spec 8.2): returns the windows it decodes."""

    def __init__(self, preset: Preset):
        self.p = preset
        self.committed = 0
        self.last_decoded = 0

    def step(self, avail: int, final: bool = False) -> tuple[int, int, int, int] | None:
        """(window start, window stop, emit start, emit stop) in frames, or None."""
        stable = avail if final else max(0, avail - self.p.holdback)
        if stable <= self.committed and not final:
            return None
        ws = max(0, self.committed - self.p.context)
        emitted = (self.committed, stable)
        self.committed = stable
        self.last_decoded = avail
        return ws, avail, *emitted

    def run(self, n: int):
        """Every decode of a stream of n generated frames, finalised at the end."""
        for avail in range(1, n + 1):
            if avail - self.last_decoded >= self.p.stride:
                w = self.step(avail)
                if w:
                    yield w
        w = self.step(n, final=True)
        if w:
            yield w


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--frames", type=int, default=64, help="frames pushed per timing run")
    p.add_argument("--rss-minutes", type=float, default=0,
                   help="also measure peak RSS of decoding this many minutes of tokens, next to "
                        "a plain (one-pass) offline decode of 60 s; each in its own process")
    p.add_argument("--rss-only", action="store_true", help="only the peak RSS measurement")
    p.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    weights = random_weights("s2", args.workdir)
    if args.rss_child:
        import audiotok

        return rss_child(audiotok.load(weights), *args.rss_child)
    res: dict = {"threads": args.threads, "torch": torch.__version__}
    if args.rss_minutes:  # first, from a parent that has not loaded anything big
        res["peak_rss_mb"] = {}
        for mode, minutes in (("chunked", args.rss_minutes), ("one_pass", 1.0)):
            out = subprocess.run([sys.executable, __file__, "--rss-child", mode, str(minutes),
                                  "--threads", str(args.threads), "--workdir", str(args.workdir)],
                                 check=True, capture_output=True, text=True).stdout
            res["peak_rss_mb"][f"{mode}_{minutes:g}min"] = json.loads(out.splitlines()[-1])
    if not args.rss_only:
        stream_timings(args, res)
    print(json.dumps(res, indent=1))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")


def stream_timings(args, res: dict) -> None:
    import audiotok

    codec = audiotok.load(args.workdir / "s2-pro-random" / "codec.pth")
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 1024, (1, 10, 400), generator=gen)

    def push_run(push: int) -> float:
        with codec.stream_decoder() as dec:
            dec.push(tokens[..., :8])  # past the start-up frames
            t = time.perf_counter()
            for i in range(8, 8 + args.frames, push):
                dec.push(tokens[..., i : i + push])
            return (time.perf_counter() - t) / args.frames

    for push in (1, 4):
        res[f"stream_push{push}_s_per_frame"] = statistics.median(
            push_run(push) for _ in range(args.repeats))
    with codec.stream_decoder() as dec:
        t = time.perf_counter()
        dec.push(tokens[..., :1])
        res["first_audio_s"] = time.perf_counter() - t  # compute; + 1 frame (46.4 ms) of audio
    offline, _ = median_time(lambda: codec.decode(tokens[..., :216]), args.repeats)
    res["offline_s_per_frame"] = offline / 216
    model = codec.model
    for preset in PRESETS:
        windows = list(Schedule(preset).run(1000))
        decoded = sum(b - a for a, b, _, _ in windows)
        ws, we, es, ee = windows[len(windows) // 2]  # a steady-state step
        with torch.inference_mode():
            step, _ = median_time(lambda ws=ws, we=we: model.decode(tokens[..., : we - ws]),
                                  args.repeats)
        first = next(iter(Schedule(preset).run(1000)))
        with torch.inference_mode():
            first_s, _ = median_time(lambda f=first: model.decode(tokens[..., : f[1] - f[0]]), 1)
        res[preset.name] = {
            "steady_window_frames": we - ws, "frames_emitted_per_step": ee - es,
            "s_per_emitted_frame": step / (ee - es),
            "decoded_per_emitted_frame_N1000": round(decoded / 1000, 1),
            "first_audio_after_frames": first[1], "first_audio_compute_s": first_s,
        }
    for k, v in list(res.items()):
        if isinstance(v, float):
            res[k] = round(v, 4)
        elif isinstance(v, dict):
            res[k] = {a: round(b, 4) if isinstance(b, float) else b for a, b in v.items()}


def rss_child(codec, mode: str, minutes: str) -> None:
    frames = int(float(minutes) * 60 * codec.frame_rate)
    tokens = torch.randint(0, 1024, (1, 10, frames), generator=torch.Generator().manual_seed(0))
    if mode == "one_pass":
        codec.streaming = dataclasses.replace(codec.streaming, pieces=None)
    before = peak_rss_mb()
    t = time.perf_counter()
    audio = codec.decode(tokens)
    seconds = time.perf_counter() - t
    print(json.dumps({"frames": frames, "audio_mb": round(audio.numel() * 4 / 2**20),
                      "rss_before_mb": round(before), "decode_s": round(seconds, 1),
                      "peak_rss_mb": round(peak_rss_mb())}))


if __name__ == "__main__":
    main()
