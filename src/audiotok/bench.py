"""`audiotok bench`: time encode, decode and streaming of a loaded codec.

Reports, per (duration, batch size): median seconds, real-time factor (processing time / audio
time, below 1 is faster than real time), audio seconds processed per second, and peak memory
(resident set on the CPU, allocated memory on a GPU) during that measurement.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from .streaming.spec import LAYERS


@dataclass
class Row:
    task: str  # encode, decode, stream (per pushed frame)
    seconds: float
    batch: int
    dtype: str
    device: str
    threads: int
    median_s: float
    rtf: float
    audio_s_per_s: float
    peak_mb: float


def test_signal(seconds: float, rate: int, batch: int, seed: int = 0) -> np.ndarray:
    """Deterministic speech-like audio [batch, n]: a gliding harmonic voice, syllable envelope,
    pauses and noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    out = np.empty((batch, n), np.float32)
    for b in range(batch):
        f0 = 110 + 30 * np.sin(2 * np.pi * 0.3 * t + b) + 20 * rng.random()
        phase = 2 * np.pi * np.cumsum(f0) / rate
        voice = sum(np.sin(k * phase) / k for k in range(1, 12))
        envelope = np.clip(np.sin(2 * np.pi * 3.5 * t + rng.random() * 6), 0, None) ** 0.5
        out[b] = 0.08 * voice * envelope + 0.005 * rng.standard_normal(n)
    return out


class PeakMemory:
    """Peak memory of a block: GPU allocator peak, or the process's resident-set high-water
    mark (reset through /proc/self/clear_refs where Linux allows it)."""

    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            reset_peak_rss()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.mb = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            self.mb = peak_rss_mb()


def reset_peak_rss() -> None:
    """Start the resident-set high-water mark afresh (Linux /proc/self/clear_refs; else no-op)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark in MB. On Linux from /proc (VmHWM):
    getrusage's ru_maxrss survives exec, so a child would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn, repeats: int, device: torch.device) -> tuple[float, object]:
    fn()  # warm-up (and caches, graphs, allocator)
    times, out = [], None
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def run(codec, seconds: list[float], batches: list[int], repeats: int = 3,
        stream: bool = False, push_frames: tuple[int, ...] = (1, 4)) -> list[Row]:
    """Time encode and decode of test audio for each (duration, batch); with `stream`, also the
    time per pushed frame of the streaming decoder (causal codecs)."""
    rows = []
    device = str(codec.device) + ("+graphs" if codec.graphs is not None else "")
    common = dict(dtype=str(codec.dtype).replace("torch.", ""), device=device,
                  threads=torch.get_num_threads())
    for secs in seconds:
        for batch in batches:
            audio = test_signal(secs, codec.input_rate, batch)
            x = torch.from_numpy(audio)[:, None]
            total = secs * batch
            with PeakMemory(codec.device) as mem:
                enc_s, codes = _timed(lambda x=x: codec.encode(x), repeats, codec.device)
            rows.append(Row("encode", secs, batch, median_s=enc_s, rtf=enc_s / secs,
                            audio_s_per_s=total / enc_s, peak_mb=mem.mb, **common))
            with PeakMemory(codec.device) as mem:
                dec_s, _ = _timed(lambda c=codes: codec.decode(c), repeats, codec.device)
            rows.append(Row("decode", secs, batch, median_s=dec_s, rtf=dec_s / secs,
                            audio_s_per_s=total / dec_s, peak_mb=mem.mb, **common))
            if stream and codec.streaming.decode == LAYERS:
                for push in push_frames:
                    rows.append(_stream_row(codec, codes.tokens, push, secs, batch, repeats,
                                            common))
    return rows


def _stream_row(codec, tokens, push: int, secs: float, batch: int, repeats: int, common) -> Row:
    frames = tokens.shape[-1]
    steps = max(1, frames // push)

    def go():
        with codec.stream_decoder(batch_size=batch) as dec:
            for i in range(steps):
                dec.push(tokens[..., i * push : (i + 1) * push])

    with PeakMemory(codec.device) as mem:
        total_s, _ = _timed(go, repeats, codec.device)
    per_frame = total_s / (steps * push)
    frame_s = codec.samples_per_frame / codec.sample_rate
    return Row(f"stream/{push}", secs, batch, median_s=per_frame, rtf=per_frame / frame_s,
               audio_s_per_s=batch * frame_s / per_frame, peak_mb=mem.mb, **common)


def table(rows: list[Row]) -> str:
    head = ("task", "audio s", "batch", "dtype", "device", "thr", "median s", "RTF",
            "audio s/s", "peak MB")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        lines.append(" | ".join([
            r.task, f"{r.seconds:g}", str(r.batch), r.dtype, r.device, str(r.threads),
            f"{r.median_s:.4f}" if r.task.startswith("stream") else f"{r.median_s:.2f}",
            f"{r.rtf:.3f}", f"{r.audio_s_per_s:.2f}", f"{r.peak_mb:.0f}"]))
    return "\n".join(lines)


def as_dicts(rows: list[Row]) -> list[dict]:
    return [{k: (round(v, 5) if isinstance(v, float) and math.isfinite(v) else v)
             for k, v in asdict(r).items()} for r in rows]
