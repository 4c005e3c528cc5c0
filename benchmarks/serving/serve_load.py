"""Load test of `audiotok serve`: N concurrent WebSocket decode streams pushing tokens at
real-time pace, on loopback, against a server this script starts (and stops).

    python benchmarks/serving/serve_load.py --model tests/data/s2_tiny/codec.pth --streams 1,8,32,64
    python benchmarks/serving/serve_load.py --model full-s2 --dtype bfloat16 --streams 1,2,4

For each server mode (batched: --max-batch 16; unbatched: --max-batch 1, one stream per step,
how servers without batching behave) and each N, interleaved (modes alternate per N): every
stream pushes `--push-frames` frames every push_frames / frame_rate seconds for `--seconds` of
audio. Per stream: time to first audio (first push to first PCM byte), inter-chunk gaps, worst
underrun against a player that starts at the first audio and plays in real time, and whether
the audio equals the offline decode of its tokens (nothing lost, nothing repeated). Reported:
TTFA p50/p95/p99, C50/C100/C200 (share of streams whose worst underrun is <= 50/100/200 ms),
how late chunks arrive after the push of their last frame (median, max), the server's steps
over 100 ms (its /metrics),
audio seconds delivered per wall second, errors, exactness (max abs <= 1e-4 against offline
decode; in reduced precision the SNR against it); and the capacity (largest N with
C100 >= 99 % and no errors). Bounded: streams, seconds and a wall-clock limit per run; loopback
only (127.0.0.1).
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser

import audiotok
from audiotok.server.protocol import tokens_to_binary


def start_server(model: str, dtype: str, threads: int, max_batch: int, max_streams: int,
                 extra: tuple[str, ...] = ()):
    cmd = [sys.executable, "-m", "audiotok", "serve", "-m", f"m={model}", "--port", "0",
           "--host", "127.0.0.1", "--dtype", dtype, "--threads", str(threads),
           "--max-batch", str(max_batch), "--max-streams", str(max_streams),
           "--log-level", "warning", *extra]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:  # it listens at once; measure only once it is warmed up (/readyz 200)
            port = int(m.group(1))
            while time.monotonic() < deadline and p.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5):
                        return p, port
                except OSError:  # 503 (HTTPError) while loading and warming up, or no answer
                    time.sleep(0.1)
            break
    p.kill()
    raise RuntimeError("the server did not start, or was not ready within 600 s")


async def one_stream(port: int, tokens: np.ndarray, push: int, frame_rate: float,
                     start_at: float) -> dict:
    from websockets.asyncio.client import connect

    out = {"chunks": [], "error": None}
    try:
        async with connect(f"ws://127.0.0.1:{port}/v1/stream/decode", max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "model": "m", "sample_format": "f32le"}))
            ready = json.loads(await ws.recv())
            if ready.get("type") != "ready":
                raise RuntimeError(ready.get("message", str(ready)))
            await asyncio.sleep(max(0.0, start_at - time.monotonic()))

            async def sender():
                t0 = time.monotonic()
                out["first_push"] = t0
                for i, a in enumerate(range(0, tokens.shape[1], push)):
                    await asyncio.sleep(max(0.0, t0 + i * push / frame_rate - time.monotonic()))
                    await ws.send(tokens_to_binary(tokens[:, a: a + push]))
                await ws.send(json.dumps({"type": "end"}))

            task = asyncio.create_task(sender())
            async for msg in ws:
                if isinstance(msg, bytes):
                    out["chunks"].append((time.monotonic(), np.frombuffer(msg, "<f4")))
                else:
                    doc = json.loads(msg)
                    if doc["type"] == "error":
                        raise RuntimeError(doc["message"])
                    if doc["type"] == "done":
                        break
            await task
    except Exception as e:  # noqa: BLE001 - counted as an error of this stream
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def stream_metrics(res: dict, sample_rate: int, samples_per_frame: int,
                   frame_rate: float) -> dict:
    arrivals = [t for t, _ in res["chunks"]]
    sizes = [c.size for _, c in res["chunks"]]
    ttfa = arrivals[0] - res["first_push"]
    before = np.concatenate([[0], np.cumsum(sizes)[:-1]]) / sample_rate
    underrun = max(0.0, max(a - (arrivals[0] + b) for a, b in zip(arrivals, before,
                                                                  strict=True)))
    gaps = np.diff(arrivals) if len(arrivals) > 1 else np.zeros(1)
    # lateness of a chunk: its arrival after the push of the last frame it completes (the
    # sender pushes frame i at first_push + i / frame_rate)
    last = np.ceil(np.cumsum(sizes) / samples_per_frame) - 1
    late = np.asarray(arrivals) - (res["first_push"] + last / frame_rate)
    return {"ttfa": ttfa, "worst_underrun": underrun, "max_gap": float(gaps.max()),
            "late_median": float(np.median(late)), "late_max": float(late.max())}


def run_level(port: int, n: int, codec, args, offline: dict) -> dict:
    rng = np.random.default_rng(n)
    frames = int(args.seconds * codec.frame_rate)
    tokens = [np.stack([rng.integers(0, s, frames) for s in codec.codebook_sizes])
              for _ in range(n)]

    async def main():
        start_at = time.monotonic() + 0.5  # every stream connected before the clock starts
        return await asyncio.wait_for(asyncio.gather(*[
            one_stream(port, t, args.push_frames, codec.frame_rate,
                       start_at + args.stagger * i) for i, t in enumerate(tokens)]),
            args.max_wall)

    results, wall = [], 0.0
    for _ in range(args.rounds):  # several rounds pool their streams (steadier percentiles)
        t = time.monotonic()
        results += asyncio.run(main())
        wall += time.monotonic() - t
    tokens = tokens * args.rounds
    n_total = n * args.rounds
    rows, errors, exact, snrs = [], [], 0, []
    for i, (res, tok) in enumerate(zip(results, tokens, strict=True)):
        if res["error"] or not res["chunks"]:
            errors.append(res["error"] or "no audio")
            continue
        rows.append(stream_metrics(res, codec.sample_rate, codec.samples_per_frame,
                                   codec.frame_rate))
        if i < args.verify:
            key = tok.tobytes()
            if key not in offline:
                offline[key] = codec.decode(torch.from_numpy(tok))[0, 0].numpy()
            audio = np.concatenate([c for _, c in res["chunks"]])
            ref = offline[key]
            if audio.shape != ref.shape:  # samples lost or repeated
                snrs.append(float("-inf"))
                continue
            exact += int(float(np.abs(audio - ref).max()) <= 1e-4)
            noise = float(np.sum((audio - ref) ** 2))
            snrs.append(float("inf") if noise == 0 else
                        10 * np.log10(float(np.sum(ref ** 2)) / noise))
    ttfa = [r["ttfa"] for r in rows]
    under = [r["worst_underrun"] for r in rows]

    def share(limit):
        return sum(u <= limit for u in under) / n_total

    audio_seconds = sum(len(c) for res in results for _, c in res["chunks"]) / codec.sample_rate
    late = [r["late_max"] for r in rows]
    return {"streams": n, "errors": len(errors), "error_examples": errors[:3],
            "chunk_late_median": _pct([r["late_median"] for r in rows], 50),
            "chunk_late_max": max(late) if late else None,
            "ttfa_p50": _pct(ttfa, 50), "ttfa_p95": _pct(ttfa, 95), "ttfa_p99": _pct(ttfa, 99),
            "C50": share(0.05), "C100": share(0.1), "C200": share(0.2),
            "worst_underrun_max": max(under) if under else None,
            "audio_seconds_per_second": audio_seconds / wall,
            "verified": min(n_total, args.verify), "exact": exact,
            "min_snr_db": min(snrs) if snrs else None}


def slow_steps(port: int) -> float:
    """Stream steps of the server so far that took over 100 ms (its /metrics histogram)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    count = re.search(r"^audiotok_step_seconds_count (\S+)", text, re.M)
    fast = re.search(r'^audiotok_step_seconds_bucket\{le="0.1"\} (\S+)', text, re.M)
    return float(count.group(1)) - float(fast.group(1)) if count and fast else float("nan")


def _pct(values, q):
    return float(np.percentile(values, q)) if values else None


def main() -> None:
    p = parser(__doc__)
    p.set_defaults(seconds=4.0, threads=2)
    p.add_argument("--model", default="tests/data/s2_tiny/codec.pth",
                   help="S2 checkpoint; full-s2: the full-size configuration, random weights")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--streams", default="1,2,4,8,16,32,64")
    p.add_argument("--modes", default="16,1", help="--max-batch values to compare")
    p.add_argument("--push-frames", type=int, default=1)
    p.add_argument("--stagger", type=float, default=0.01, help="seconds between stream starts")
    p.add_argument("--verify", type=int, default=1000, help="streams checked against offline")
    p.add_argument("--max-wall", type=float, default=300.0, help="seconds per round at most")
    p.add_argument("--server-args", default="",
                   help="more `audiotok serve` options for both modes, e.g. '--step-wait-ms 40'")
    p.add_argument("--rounds", type=int, default=1,
                   help="rounds per level and mode; their streams are pooled")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model == "full-s2":
        from models import random_weights

        args.model = str(random_weights("s2", args.workdir))
    elif not Path(args.model).exists() and (ROOT / args.model).exists():
        args.model = str(ROOT / args.model)
    args.model = str(Path(args.model).resolve())
    codec = audiotok.load(args.model, dtype=getattr(torch, args.dtype))
    levels = [int(n) for n in args.streams.split(",")]
    modes = [int(m) for m in args.modes.split(",")]
    servers = {m: start_server(args.model, args.dtype, args.threads, m, max(levels),
                               tuple(args.server_args.split()))
               for m in modes}
    offline: dict = {}
    results: dict = {m: [] for m in modes}
    gc.collect()
    gc.freeze()  # this process's own pauses would count as the server's lateness
    try:
        for n in levels:
            for m in modes:
                slow = slow_steps(servers[m][1])
                row = run_level(servers[m][1], n, codec, args, offline)
                row["steps_over_100ms"] = slow_steps(servers[m][1]) - slow
                results[m].append(row)
                print(f"max_batch {m:3d} | {n:3d} streams | TTFA p50 {row['ttfa_p50']:.3f} "
                      f"p99 {row['ttfa_p99']:.3f} s | C100 {row['C100']:.2%} C200 "
                      f"{row['C200']:.2%} | {row['audio_seconds_per_second']:.2f} audio s/s "
                      f"| errors {row['errors']} | exact {row['exact']}/{row['verified']} "
                      f"(min SNR {row['min_snr_db']:.1f} dB vs offline) | chunks late "
                      f"median {row['chunk_late_median'] * 1e3:.0f} max "
                      f"{row['chunk_late_max'] * 1e3:.0f} ms | steps over 100 ms "
                      f"{row['steps_over_100ms']:.0f}", flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(60)
    summary = {}
    for m in modes:
        ok = [r["streams"] for r in results[m] if r["C100"] >= 0.99 and r["errors"] == 0]
        summary[m] = {"capacity": max(ok) if ok else 0}
        print(f"max_batch {m}: capacity {summary[m]['capacity']} real-time streams "
              "(C100 >= 99 %, no errors)")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "results": results, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
