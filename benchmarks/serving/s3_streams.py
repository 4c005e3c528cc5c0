"""S3 token-to-audio streams served together: N CosyVoice 2 chunk streams (released sizes,
random weights, each in its own voice of the same prompt length) whose chunks come due in the
same steps, advanced as the engine's step advances them (ChunkStream.push_together: the flows
of the due chunks as the rows of one call), against the same streams advanced one after
another (each chunk's flow alone), interleaved in one process.

    python benchmarks/serving/s3_streams.py --streams 1,2,4 --seconds 5 --prompt 3 --threads 2

Tokens arrive chunk by chunk: a step gives each stream the tokens of its next chunk (the first
step its first chunk and the 3 tokens after it), the last step finishes the streams. Reports,
medians of --repeats: the first step's time (every stream's first audio comes at its end;
one after another, the first stream's comes after 1/N of it on average), the time of all steps,
audio seconds per compute second, and the largest difference of a stream's audio between the
two ways.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import ROOT, parser

sys.path.insert(0, str(ROOT))
from tests.models.s3 import t2w_reference as t2w  # noqa: E402


def pieces(n_tokens: int, n_prompt: int, hop: int = 25, lookahead: int = 3) -> list[int]:
    """Token counts of each step's push: a chunk each (the first padded to a chunk boundary
    after the prompt, with the lookahead), then what is left."""
    first = hop + (-n_prompt) % hop + lookahead
    out, sent = [min(first, n_tokens)], min(first, n_tokens)
    while sent < n_tokens:
        out.append(min(hop, n_tokens - sent))
        sent += out[-1]
    return out


def advance(model, voices, tokens, together: bool) -> tuple[float, float, list[torch.Tensor]]:
    """(seconds of the first step, seconds of all steps, each stream's audio)."""
    from audiotok.models.s3.token2wav.stream import ChunkStream

    streams = [ChunkStream(model, v, 0, None, "cpu") for v in voices]
    steps = pieces(tokens.shape[-1], voices[0].tokens.numel())
    outs: list[list[torch.Tensor]] = [[] for _ in streams]
    first, at, t0 = 0.0, 0, time.perf_counter()
    for k, n in enumerate([*steps, 0]):
        x = [tokens[i: i + 1, :, at: at + n] for i in range(len(streams))]
        end = [k == len(steps)] * len(streams)
        if together:
            got = ChunkStream.push_together(streams, x, end)
        else:
            got = [ChunkStream.push_together([s], [xi], [e])[0]
                   for s, xi, e in zip(streams, x, end, strict=True)]
        for o, g in zip(outs, got, strict=True):
            o.append(g)
        at += n
        if k == 0:
            first = time.perf_counter() - t0
    return first, time.perf_counter() - t0, [torch.cat(o, -1) for o in outs]


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--streams", default="1,2,4", help="concurrent streams")
    p.add_argument("--prompt", type=float, default=3.0, help="seconds of voice prompt")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from audiotok.models.s3.token2wav.voice import Voice
    from audiotok.nn.kernels.cpu import this_cpu

    flow, hift = t2w.cosyvoice_flow(small=False), t2w.cosyvoice_hift(small=False)
    model = t2w.audiotok_token2wav(flow, hift)
    del flow, hift
    counts = [int(n) for n in args.streams.split(",")]
    g = torch.Generator().manual_seed(0)
    n_prompt, n_tokens = int(25 * args.prompt), int(25 * args.seconds)
    voices = [Voice(torch.randint(0, 6561, (n_prompt,), generator=g),
                    torch.randn(2 * n_prompt, 80, generator=g), torch.randn(192, generator=g))
              for _ in range(max(counts))]
    tokens = torch.randint(0, 6561, (max(counts), 1, n_tokens), generator=g)
    times = {(n, way): ([], []) for n in counts for way in ("together", "one by one")}
    diff = {n: 0.0 for n in counts}
    with torch.inference_mode():
        for _ in range(args.repeats):
            for n in counts:
                audio = {}
                for way in ("together", "one by one"):
                    first, total, audio[way] = advance(model, voices[:n], tokens[:n],
                                                       way == "together")
                    times[n, way][0].append(first)
                    times[n, way][1].append(total)
                diff[n] = max(diff[n], max(float((a - b).abs().max()) for a, b in zip(
                    audio["together"], audio["one by one"], strict=True)))
    cpu = this_cpu().describe()
    print(f"S3 token-to-audio streams, released sizes (random weights), {args.seconds:g} s of "
          f"tokens each after a {args.prompt:g} s prompt, float32, {args.threads} threads, "
          f"median of {args.repeats}; {cpu}")
    print("| streams | way | first step (s) | all steps (s) | audio s per compute s | "
          "max abs diff |\n|---|---|---|---|---|---|")
    rows = []
    for (n, way), (first, total) in times.items():
        row = {"streams": n, "way": way, "first_step_s": statistics.median(first),
               "total_s": statistics.median(total)}
        row["audio_per_compute"] = n * args.seconds / row["total_s"]
        rows.append(row)
        print(f"| {n} | {way} | {row['first_step_s']:.2f} | {row['total_s']:.2f} | "
              f"{row['audio_per_compute']:.3f} | {diff[n]:.1e} |")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "rows": rows, "max_abs_diff": diff,
                                         "args": {"seconds": args.seconds,
                                                  "prompt": args.prompt,
                                                  "threads": args.threads,
                                                  "repeats": args.repeats}}, indent=1))


if __name__ == "__main__":
    main()
