"""Corpus tokenization with the S3 tokenizer: `audiotok.pipeline.tokenize` against the s3tokenizer
package's own batched run (its command line's loop: log-mel per file, `padding`, `quantize` of
--batch files at a time, in file order) on the same files, full size, random weights; audio
hours per hour of each, codes compared file by file, peak resident memory of each run.

    python benchmarks/codecs/s3_corpus.py --minutes 10 --variant v2_25hz --batch 8 --threads 2

The corpus: 16 kHz WAV files of 2 to 30 s (uniform lengths, speech looped from a random
offset). Each run is timed from the first file read to the last tokens; the models are loaded
beforehand. `--dtype bfloat16` also runs audiotok in bfloat16 and states how many of its codes
equal float32's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser, peak_rss_mb, speech

from audiotok.bench import reset_peak_rss

sys.path.insert(0, str(ROOT))
from tests.models.s3 import reference  # noqa: E402


def make_corpus(root: Path, minutes: float) -> list[Path]:
    files = sorted(root.glob("*.wav"))
    if (root / "done").exists():
        return files
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    source = speech(60, 16000)
    total, i = 0.0, 0
    while total < minutes * 60:
        seconds = float(rng.uniform(2, 30))
        start = int(rng.integers(0, source.size))
        x = np.roll(source, -start)[: int(seconds * 16000)]
        x = np.tile(x, int(np.ceil(seconds * 16000 / x.size)))[: int(seconds * 16000)]
        sf.write(root / f"{i:05d}.wav", x, 16000, subtype="FLOAT")
        total, i = total + seconds, i + 1
    (root / "done").write_text(str(total))
    return sorted(root.glob("*.wav"))


def package_run(model, files: list[Path], batch: int) -> dict[str, list[int]]:
    s3 = reference.import_s3tokenizer()
    out = {}
    for a in range(0, len(files), batch):
        group = files[a : a + batch]
        mels = [s3.log_mel_spectrogram(torch.from_numpy(sf.read(f, dtype="float32")[0]))
                for f in group]
        mel, lengths = s3.padding(mels)
        codes, n = model.quantize(mel, lengths)
        for j, f in enumerate(group):
            out[f.stem] = codes[j, : int(n[j])].tolist()
    return out


def audiotok_run(codec, corpus: Path, out: Path) -> dict[str, list[int]]:
    import shutil

    import pyarrow.parquet as pq

    from audiotok.pipeline import tokenize

    shutil.rmtree(out, ignore_errors=True)
    tokenize(corpus, codec, out, progress=False, workers=1)
    rows = {}
    for shard in sorted(out.glob("*.parquet")):
        for r in pq.read_table(shard).to_pylist():  # (one codebook: the flat tokens)
            rows[Path(r["path"]).stem] = list(r["tokens"])
    return rows


def timed(fn):
    reset_peak_rss()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, peak_rss_mb(), out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--minutes", type=float, default=10.0, help="audio in the corpus")
    p.add_argument("--variant", default="v2_25hz")
    p.add_argument("--batch", type=int, default=8, help="files per s3tokenizer batch")
    p.add_argument("--dtype", default="float32", help="also run audiotok in this dtype")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import audiotok

    files = make_corpus(args.workdir / f"s3_corpus_{args.minutes:g}min", args.minutes)
    hours = sum(sf.info(f).duration for f in files) / 3600
    ref = reference.reference_model(args.variant, small=False)
    path = args.workdir / f"s3_{args.variant}_full" / "model.pt"
    if not path.exists():
        reference.save_pt(ref, path)
    results = {"threads": args.threads, "files": len(files), "audio_hours": hours,
               "variant": args.variant, "batch": args.batch, "runs": {}}
    with torch.inference_mode():
        s, mb, theirs = timed(lambda: package_run(ref, files, args.batch))
    results["runs"]["s3tokenizer 0.3.0"] = {"seconds": s, "hours_per_hour": hours * 3600 / s,
                                            "peak_mb": mb}
    for dtype in dict.fromkeys(["float32", args.dtype]):
        codec = audiotok.load(path, variant=args.variant, dtype=getattr(torch, dtype))
        s, mb, ours = timed(lambda c=codec, d=dtype: audiotok_run(
            c, files[0].parent, args.workdir / f"s3_tokens_{d}"))
        same = [np.array_equal(ours[k], v) for k, v in theirs.items()]
        equal = np.mean([np.mean(np.asarray(ours[k]) == np.asarray(v)) for k, v in theirs.items()])
        results["runs"][f"audiotok {dtype}"] = {
            "seconds": s, "hours_per_hour": hours * 3600 / s, "peak_mb": mb,
            "files_equal": f"{sum(same)} of {len(same)}", "codes_equal": float(equal)}
    base = results["runs"]["s3tokenizer 0.3.0"]["seconds"]
    for name, r in results["runs"].items():
        print(f"{name:20s} {r['seconds']:8.1f} s  {r['hours_per_hour']:7.1f} h/h  "
              f"{base / r['seconds']:.2f}x  peak {r['peak_mb']:.0f} MB  "
              f"{r.get('files_equal', '')} {r.get('codes_equal', '')}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
