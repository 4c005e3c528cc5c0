"""S3 token-to-audio at the released sizes (random weights): audiotok's decode against CosyVoice
2's own flow and HiFT (cosyvoice-minicpmo 0.1.0, .refs/s3gen) on the same tokens, voice and
noise, interleaved in one process; the flow and the vocoder timed apart, medians, and the
largest difference of the audio.

    python benchmarks/codecs/s3_token2wav.py --seconds 10 --prompt 3 --threads 2 --repeats 3
    python benchmarks/codecs/s3_token2wav.py --stream --seconds 10 --prompt 3 --repeats 1

--stream: CosyVoice 2's chunk-aware stream instead, all tokens known at the start (the
reference's `token2wav` calls of its tts(stream=True) loop, without the loop's 0.1 s polls,
against audiotok's stream pushed the same tokens, and its exact stream): each chunk's compute
time (the first one is the stream's first audio), samples out, and the largest difference of
each chunk's audio from the reference's.

The reference runs as CosyVoice2Model.token2wav runs offline: flow.inference (batch 1, the
conditioned and unconditioned rows of each of the 10 Euler steps as one batch of 2), then
hift.inference. F0 is forced voiced (the classifier's bias at 150 Hz) so that the harmonic
path runs, as with real weights.
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


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--prompt", type=float, default=3.0, help="seconds of voice prompt")
    p.add_argument("--stream", action="store_true", help="time the chunk-aware stream")
    p.add_argument("--bfloat16", action="store_true",
                   help="also audiotok with the flow in bfloat16 (the vocoder in float32)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from audiotok.models.s3.token2wav.voice import Voice
    from audiotok.nn.kernels.cpu import this_cpu

    flow, hift = t2w.cosyvoice_flow(small=False), t2w.cosyvoice_hift(small=False)
    ours = t2w.audiotok_token2wav(flow, hift)
    g = torch.Generator().manual_seed(0)
    n_prompt, n_tokens = int(25 * args.prompt), int(25 * args.seconds)
    voice = Voice(torch.randint(0, 6561, (n_prompt,), generator=g),
                  torch.randn(2 * n_prompt, 80, generator=g), torch.randn(192, generator=g))
    tokens = torch.randint(0, 6561, (1, n_tokens), generator=g)

    def reference():
        t0 = time.perf_counter()
        mel, _ = flow.inference(token=tokens, token_len=torch.tensor([n_tokens]),
                                prompt_token=voice.tokens[None],
                                prompt_token_len=torch.tensor([n_prompt]),
                                prompt_feat=voice.mel[None],
                                prompt_feat_len=torch.tensor([2 * n_prompt]),
                                embedding=voice.embedding[None], streaming=False, finalize=True)
        t1 = time.perf_counter()
        torch.manual_seed(0)
        audio, _ = hift.inference(speech_feat=mel)
        return audio[0], t1 - t0, time.perf_counter() - t1

    def audiotok_run(model=ours):
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(0)
        noise = model.noise(2 * (n_prompt + n_tokens), gen)
        mel = model.flow(tokens, voice.tokens[None], voice.mel[None], voice.embedding[None],
                         noise)
        t1 = time.perf_counter()
        from audiotok.models.s3.token2wav.hift import HiftNoise

        audio = model.hift(mel, HiftNoise.draw(model.hift.config, 1, mel.shape[-1], gen))
        return audio[0, 0], t1 - t0, time.perf_counter() - t1

    if args.stream:
        return stream(args, flow, hift, ours, voice, tokens)
    runs = {"cosyvoice2": reference, "audiotok": audiotok_run}
    if args.bfloat16:  # the codec's islands: the vocoder in float32
        import copy

        from audiotok.nn.precision import set_precision

        half = copy.deepcopy(ours)
        set_precision(half, torch.bfloat16, [half.hift])
        runs["audiotok bfloat16"] = lambda: audiotok_run(half)
    times = {k: ([], []) for k in runs}
    out = {}
    with torch.inference_mode():
        for _ in range(args.repeats):
            for name, fn in runs.items():
                audio, t_flow, t_hift = fn()
                out[name] = audio
                times[name][0].append(t_flow)
                times[name][1].append(t_hift)
    diff = float((out["audiotok"] - out["cosyvoice2"]).abs().max())
    if args.bfloat16:
        err = out["audiotok bfloat16"] - out["audiotok"]
        snr = float(10 * torch.log10(out["audiotok"].pow(2).sum() / err.pow(2).sum()))
        print(f"bfloat16 against float32: max abs difference {float(err.abs().max()):.2e}, "
              f"SNR {snr:.1f} dB")
    rows = {k: {"flow_s": statistics.median(f), "hift_s": statistics.median(h)}
            for k, (f, h) in times.items()}
    cpu = this_cpu().describe()
    print(f"S3 token-to-audio, released sizes (random weights), {args.seconds:g} s of tokens, "
          f"{args.prompt:g} s prompt, float32, {args.threads} threads, median of "
          f"{args.repeats}; {cpu}")
    print("| | flow (s) | HiFT (s) | total (s) |\n|---|---|---|---|")
    for k, r in rows.items():
        print(f"| {k} | {r['flow_s']:.2f} | {r['hift_s']:.2f} | "
              f"{r['flow_s'] + r['hift_s']:.2f} |")
    ratio = sum(rows["cosyvoice2"].values()) / sum(rows["audiotok"].values())
    print(f"reference / audiotok: {ratio:.2f}; audio max abs difference {diff:.2e}")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "rows": rows, "ratio": ratio,
                                         "max_abs_diff": diff, "args": {
                                             "seconds": args.seconds, "prompt": args.prompt,
                                             "threads": args.threads,
                                             "repeats": args.repeats},
                                         **({"bfloat16_snr_db": snr} if args.bfloat16 else {})},
                                        indent=1))


def stream(args, flow, hift, ours, voice, tokens) -> None:
    """Chunk by chunk: the reference's token2wav calls and audiotok's pushes, interleaved."""
    from cosyvoice.cli.model import CosyVoice2Model

    from audiotok.models.s3.token2wav.stream import ChunkStream
    from audiotok.nn.kernels.cpu import this_cpu

    ref = CosyVoice2Model(None, flow, hift)
    n, p = tokens.shape[1], voice.tokens.numel()
    hops, at = [], 0
    while True:  # the reference's schedule (hop 25, the first padded to a chunk boundary)
        hop = 25 + (-p) % 25 if at == 0 else 25
        if n - at < hop + 3:
            break
        hops.append(hop)
        at += hop
    rows = []
    with torch.inference_mode():
        for _ in range(args.repeats):
            ref.hift_cache_dict["b"] = None
            torch.manual_seed(0)
            mine = ChunkStream(ours, voice, 0, None, "cpu")
            exact = ChunkStream(ours, voice, 0, None, "cpu", exact=True)
            offset, times = 0, []
            for i in range(len(hops) + 1):
                last = i == len(hops)
                end = n if last else offset + hops[i] + 3
                t0 = time.perf_counter()
                want = ref.token2wav(token=tokens[:, :end], prompt_token=voice.tokens[None],
                                     prompt_feat=voice.mel[None],
                                     embedding=voice.embedding[None], token_offset=offset,
                                     uuid="b", stream=not last, finalize=last)[0]
                t1 = time.perf_counter()
                x = tokens[None, :, offset + (3 if i else 0): end]
                got = mine.push(x)
                if last:
                    assert got.shape[-1] == 0  # (fewer than a chunk's tokens left)
                    got = mine.finish()
                t2 = time.perf_counter()
                exact_out = exact.push(x)
                if last:
                    exact_out = torch.cat([exact_out, exact.finish()], -1)
                t3 = time.perf_counter()
                times.append((t1 - t0, t2 - t1, float((got[0, 0] - want).abs().max()),
                              got.shape[-1], t3 - t2, exact_out.shape[-1]))
                offset += 0 if last else hops[i]
            rows.append(times)
    cpu = this_cpu().describe()
    print(f"S3 token-to-audio stream, released sizes (random weights), {args.seconds:g} s of "
          f"tokens, {args.prompt:g} s prompt, float32, {args.threads} threads, median of "
          f"{args.repeats}; {cpu}")
    print("| chunk | tokens in | samples out | CosyVoice 2 (s) | audiotok (s) | max abs diff | "
          "exact (s) | exact samples out |")
    print("|---|---|---|---|---|---|---|---|")
    table, seen = [], 0
    for i in range(len(hops) + 1):
        ref_s = statistics.median(r[i][0] for r in rows)
        ours_s = statistics.median(r[i][1] for r in rows)
        exact_s = statistics.median(r[i][4] for r in rows)
        diff, samples, exact_samples = rows[-1][i][2], rows[-1][i][3], rows[-1][i][5]
        seen = n if i == len(hops) else sum(hops[: i + 1]) + 3
        table.append({"chunk": i, "tokens_in": seen, "samples": samples, "reference_s": ref_s,
                      "audiotok_s": ours_s, "max_abs_diff": diff, "exact_s": exact_s,
                      "exact_samples": exact_samples})
        print(f"| {i} | {seen} | {samples} | {ref_s:.2f} | {ours_s:.2f} | {diff:.1e} | "
              f"{exact_s:.2f} | {exact_samples} |")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "chunks": table, "args": {
            "seconds": args.seconds, "prompt": args.prompt, "threads": args.threads,
            "repeats": args.repeats}}, indent=1))


if __name__ == "__main__":
    main()
