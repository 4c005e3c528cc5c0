"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audiotok.bench import peak_rss_mb, reset_peak_rss  # noqa: F401 - for the scripts

ROOT = Path(__file__).resolve().parents[1]


def speech(seconds: float, rate: int) -> np.ndarray:
    """examples/speech.wav at `rate`, looped to `seconds`."""
    from audiotok.audio import read_audio, resample

    x, r = read_audio(ROOT / "examples" / "speech.wav")
    x = resample(x[0], r, rate)
    return np.tile(x, int(np.ceil(seconds * rate / x.size)))[: int(seconds * rate)]


def matmul_gflops(shapes: list[tuple[int, int, int]], repeats: int) -> dict:
    """GFLOP/s of float32 torch.matmul [m, k] @ [k, n] per shape (median of `repeats`, after
    an untimed call): the machine's product rate that a model's floor is measured against."""
    import torch

    out = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        a @ b
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            a @ b
            ts.append(time.perf_counter() - t)
        out[f"{m}x{k} @ {k}x{n}"] = 2 * m * k * n / statistics.median(ts) / 1e9
    return out


def median_time(fn, repeats: int, warmup: bool = True) -> tuple[float, object]:
    """(median seconds of `repeats` calls, last result), after one untimed call."""
    if warmup:
        fn()
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def per_call(fn, calls: int) -> float:
    """Mean seconds of `calls` calls of fn."""
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls


@dataclass
class Measured:
    """A result that carries its own timing (a call another process ran and timed)."""

    seconds: float
    mb: float
    value: object


def timed(fn) -> tuple[float, float, object]:
    """(seconds, extra peak resident MB, result) of one call; a Measured result gives its own."""
    reset_peak_rss()  # the high-water mark restarts at the current resident set
    base = peak_rss_mb()
    t = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t
    if isinstance(out, Measured):
        return out.seconds, out.mb, out.value
    return seconds, max(0.0, peak_rss_mb() - base), out


def encode_decode_rounds(impls: dict, repeats: int) -> tuple[dict, dict, dict]:
    """impls: name -> (encode(), decode(codes) or None for an encode-only codec). `repeats`
    rounds, the implementations interleaved: (times[name, "encode" | "decode"] lists of seconds,
    extra peak MB of the last call of each, each implementation's last codes)."""
    decodes = all(dec is not None for _, dec in impls.values())
    times = {(name, k): [] for name in impls for k in ("encode", "decode")[: 1 + decodes]}
    memory, codes = {}, {}
    for _ in range(repeats):
        for name, (enc, dec) in impls.items():
            s, mb, c = timed(enc)
            times[name, "encode"].append(s)
            memory[name, "encode"] = mb
            codes[name] = c
            if not decodes:
                continue
            s, mb, _ = timed(lambda c=c, dec=dec: dec(c))
            times[name, "decode"].append(s)
            memory[name, "decode"] = mb
    return times, memory, codes


# the operators that run matrix products, convolutions and recurrences (aten::_convolution's
# own time is oneDNN's transposed convolution, which has no operator of its own)
PRODUCTS = ("mkldnn::_linear_pointwise", "aten::mkldnn_convolution", "aten::_convolution",
            "aten::_slow_conv2d_forward", "aten::bmm", "aten::mm", "aten::addmm",
            "aten::baddbmm", "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten::mkldnn_rnn_layer")


def product_ms(fn, calls: int) -> tuple[float, float]:
    """(ms in the products alone, ms in all operators) a call of fn, from torch.profiler's
    self times: what the products take with nothing else around them."""
    from torch.profiler import profile

    with profile() as prof:
        for _ in range(calls):
            fn()
    events = prof.key_averages()
    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    return products / 1e3 / calls, sum(e.self_cpu_time_total for e in events) / 1e3 / calls


def parser(doc: str):
    """An argument parser with the options every benchmark takes."""
    import argparse

    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0, help="audio per run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3, help="timed runs (median reported)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/audiotok-bench"),
                   help="where random weights are written once")
    p.add_argument("--json", type=Path, help="also write the results here")
    return p


def report_rounds(rows: list, times: dict, memory: dict, same: bool | str, seconds: float,
                  nominal: float, ours: str = "audiotok") -> None:
    """Rows and printed lines for encode_decode_rounds' results (medians, real-time factors,
    extra peak memory, whether the codes were equal or how many differ), then `ours` against
    the faster of the other implementations, per operation. `seconds` of audio ran; `nominal`
    was asked for."""
    names = list(dict.fromkeys(name for name, _ in times))
    width = max(len(n) for n in names)
    for (name, kind), ts in times.items():
        med = statistics.median(ts)
        rows.append({"seconds": seconds, "impl": name, "op": kind, "median_s": med,
                     "rtf": med / nominal, "extra_peak_mb": memory[name, kind],
                     "codes_equal": same})
        print(f"{seconds:5.1f} s {kind:6s} {name:{width}s} {med:7.2f} s  RTF {med / nominal:.3f}"
              f"  +{memory[name, kind]:6.0f} MB  codes equal: {same}")
    for kind in dict.fromkeys(kind for _, kind in times):
        fastest = min(statistics.median(times[name, kind]) for name in names if name != ours)
        ratio = fastest / statistics.median(times[ours, kind])
        print(f"{seconds:5.1f} s {kind}: {ours} {ratio:.2f}x the faster reference")


def snr(x: np.ndarray, ref: np.ndarray) -> float:
    """dB of ref over x - ref (inf when equal)."""
    noise = np.sum((x - ref) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref**2) / noise))


def stream_row(name: str, times: list[float], seconds: float, frames_per_frame: float,
               first_audio_frames: int, audio: np.ndarray, offline: np.ndarray) -> dict:
    """One decode stream's figures against the offline decode (printed as a line too): median
    time, time per second of audio, frames decoded a frame, first audio, max |diff|, SNR."""
    assert audio.shape == offline.shape, (name, audio.shape, offline.shape)
    row = {"stream": name, "median_s": float(np.median(times)),
           "seconds_per_audio_second": float(np.median(times)) / seconds,
           "frames_decoded_per_frame": frames_per_frame, "first_audio_frames": first_audio_frames,
           "max_abs_diff": float(np.abs(audio - offline).max()), "snr_db": snr(audio, offline)}
    print(f"{name:24s} {row['median_s']:6.2f} s for {seconds:.1f} s of audio  "
          f"{frames_per_frame:.2f} frames decoded a frame  first audio after "
          f"{first_audio_frames} frames  max |diff| {row['max_abs_diff']:.2e}  "
          f"SNR {row['snr_db']:.1f} dB")
    return row


def interleaved(runs: dict, repeats: int) -> tuple[dict[str, list[float]], dict]:
    """Each of `runs` (name -> fn()) `repeats` times, round by round: (times by name, each
    one's last output)."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    out = {}
    for _ in range(repeats):
        for name, run in runs.items():
            t = time.perf_counter()
            out[name] = run()
            times[name].append(time.perf_counter() - t)
    return times, out
