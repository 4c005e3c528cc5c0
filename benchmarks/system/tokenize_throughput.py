"""End-to-end `tokenize` throughput against bare batched encode on the same files.

    python benchmarks/system/tokenize_throughput.py --model tests/data/s2_tiny/codec.pth \
        --minutes 20
    python benchmarks/system/tokenize_throughput.py --model full-s2 --minutes 5 --repeats 1

Writes a corpus of speech files (2 to 14 s, sample rates 16 to 48 kHz, WAV and FLAC) into
--workdir, then alternates, --repeats times: (a) bare encode: every file read and resampled
beforehand (untimed), then the timed part is only `encode` of the same length-bucketed batches
the pipeline forms; (b) `audiotok.pipeline.tokenize` on the folder, timed from start to end with
the model already loaded (reading in worker processes, encoding, Parquet writing, manifest).
Reports audio hours per hour of each and their ratio (median over repeats). `--model full-s2`
or `full-xcodec2` use the full-size random weights of benchmarks/codecs/compare.py.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser, speech

RATES = (16000, 22050, 24000, 44100, 48000)


def make_corpus(root: Path, minutes: float) -> float:
    """Files totalling about `minutes` of audio; their total duration in seconds."""
    if (root / "done").exists():
        return float((root / "done").read_text())
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(0)
    base = speech(30, 48000)
    total, i = 0.0, 0
    while total < minutes * 60:
        secs, rate = float(rng.uniform(2, 14)), int(rng.choice(RATES))
        start = int(rng.integers(0, base.size - int(secs * 48000)))
        x = base[start: start + int(secs * 48000)]
        x = np.interp(np.arange(int(secs * rate)) * 48000 / rate, np.arange(x.size), x)
        path = root / f"spk{i % 7}" / f"utt{i:05d}.{'flac' if i % 2 else 'wav'}"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, x.astype(np.float32), rate)
        total, i = total + secs, i + 1
    (root / "done").write_text(str(total))
    return total


def bare_encode(codec, corpus: Path, batch_seconds: float) -> float:
    """Seconds spent in encode alone, on the pipeline's batches."""
    from audiotok.pipeline.batching import ReadSettings, encode_decoded, read_item
    from audiotok.pipeline.sources import open_source

    settings = ReadSettings(codec.sample_rate)
    decoded = [read_item(it, settings) for it in open_source(corpus).items]
    start = time.perf_counter()
    with torch.inference_mode():
        encode_decoded(codec, decoded, batch_seconds)
    return time.perf_counter() - start


def pipeline(codec, corpus: Path, out: Path, batch_seconds: float, workers: int) -> float:
    from audiotok.pipeline import tokenize

    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    s = tokenize(corpus, codec, out, batch_seconds=batch_seconds, workers=workers,
                 progress=False)
    assert s.failed == 0 and s.complete
    return time.perf_counter() - start


def model_path(name: str, workdir: Path) -> str:
    if name in ("full-s2", "full-xcodec2"):
        from models import random_weights

        return str(random_weights(name.removeprefix("full-"), workdir))
    return name


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--minutes", type=float, default=20.0, help="audio in the corpus")
    p.add_argument("--batch-seconds", type=float, default=60.0)
    p.add_argument("--workers", type=int, default=1, help="reader processes of the pipeline")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import audiotok
    from audiotok.nn.kernels.cpu import this_cpu

    codec = audiotok.load(model_path(args.model, args.workdir))
    corpus = args.workdir / f"corpus-{args.minutes:g}min"
    audio_s = make_corpus(corpus, args.minutes)
    hours = audio_s / 3600
    bare, piped = [], []
    for _ in range(args.repeats):
        bare.append(bare_encode(codec, corpus, args.batch_seconds))
        piped.append(pipeline(codec, corpus, args.workdir / "tokens", args.batch_seconds,
                              args.workers))
        print(f"bare {bare[-1]:.2f} s, pipeline {piped[-1]:.2f} s", flush=True)
    b, t = statistics.median(bare), statistics.median(piped)
    result = {"model": args.model, "codec": codec.name, "cpu": this_cpu().describe(),
              "audio_hours": round(hours, 4),
              "threads": args.threads, "workers": args.workers,
              "batch_seconds": args.batch_seconds, "bare_s": bare, "pipeline_s": piped,
              "bare_hours_per_hour": round(hours * 3600 / b, 1),
              "pipeline_hours_per_hour": round(hours * 3600 / t, 1),
              "pipeline_vs_bare": round(b / t, 3)}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
