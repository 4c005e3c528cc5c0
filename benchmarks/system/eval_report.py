"""`audiotok eval` on a few minutes of synthesised speech: Opus and resampling baselines, the
tiny test models and (with --full) both codecs' full-size configurations with random weights.

    python benchmarks/system/eval_report.py --minutes 3 --out /tmp/audiotok-eval --full

The corpus is spoken by espeak-ng (apt-get install espeak-ng) in several voices and speeds,
written once to --workdir/speech-corpus at 22.05 kHz; without espeak-ng, examples/speech.wav is
cut into pieces instead. Prints the summary table and the time the run took, and writes the
report folder (report.html, report.md, summary.json) to --out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import soundfile as sf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import ROOT, parser

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "A neural audio codec turns a waveform into a short sequence of discrete tokens.",
    "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack.",
    "The weather report said that heavy rain would arrive late on Thursday evening.",
    "Language models read those tokens and learn to continue them one frame at a time.",
    "She sells sea shells by the sea shore, and the shells she sells are surely real.",
    "We measured the reconstruction against the original with several metrics.",
    "Numbers like three hundred and forty two should be spoken clearly and slowly.",
    "In the middle of the night, the old clock in the hallway struck twelve times.",
    "Every codec trades bitrate against quality, and the curve is rarely a straight line.",
    "The train to the coast leaves from platform nine at a quarter past seven.",
    "How much wood would a woodchuck chuck if a woodchuck could chuck wood?",
    "Bright sunlight poured through the tall windows of the quiet library.",
    "Speech synthesis systems need a tokenizer that keeps the voice and the words.",
    "He answered the question calmly, then walked out into the crowded street.",
]
VOICES = [("en-us", 165), ("en", 150), ("en-us+f3", 175), ("en+m3", 140), ("en-us+f5", 185),
          ("en+m7", 155)]


def corpus(folder: Path, minutes: float) -> Path:
    """WAV files of synthesised speech adding up to about `minutes`."""
    if folder.exists() and any(folder.glob("*.wav")):
        return folder
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    total, i = 0.0, 0
    espeak = shutil.which("espeak-ng")
    speech, rate = sf.read(ROOT / "examples" / "speech.wav", dtype="float32")
    while total < minutes * 60:
        path = tmp / f"{i:03d}.wav"
        if espeak:
            voice, speed = VOICES[i % len(VOICES)]
            subprocess.run([espeak, "-v", voice, "-s", str(speed), "-w", str(path),
                            SENTENCES[i % len(SENTENCES)]], check=True)
        else:  # pieces of the shipped sample, 3-7 s each
            n = int(rate * (3 + i % 5))
            start = (i * 7919 * 13) % (speech.size - n)
            sf.write(path, speech[start: start + n], rate)
        total += sf.info(path).duration
        i += 1
    tmp.rename(folder)
    return folder


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--minutes", type=float, default=3.0)
    p.add_argument("--out", type=Path, default=Path("/tmp/audiotok-eval"))
    p.add_argument("--full", action="store_true",
                   help="also the full-size S2 and X-Codec2 configurations (random weights)")
    p.add_argument("--models", default=None,
                   help="comma-separated -m values instead of the default set")
    p.add_argument("--examples", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from models import random_weights

    from audiotok.eval import EvalSettings, evaluate
    from audiotok.eval.report import tables

    source = corpus(args.workdir / "speech-corpus", args.minutes)
    if args.models:
        models = args.models.split(",")
    else:
        models = ["opus:6k", "opus:12k", "resample:16k",
                  f"s2_tiny={ROOT / 'tests/data/s2_tiny/codec.pth'}",
                  f"xcodec2_tiny={ROOT / 'tests/data/xcodec2_tiny/hf'}"]
        if args.full:
            models += [f"s2_full_random={random_weights('s2', args.workdir)}",
                       f"xcodec2_full_random={random_weights('xcodec2', args.workdir)}"]
    seconds = sum(sf.info(f).duration for f in source.glob("*.wav"))
    start = time.perf_counter()
    summary = evaluate(source, models, args.out, EvalSettings(examples=args.examples,
                                                              overwrite=True))
    took = time.perf_counter() - start
    title, header, rows = tables(summary)[0]
    print(f"{len(list(source.glob('*.wav')))} items, {seconds / 60:.2f} min of speech; "
          f"{took:.0f} s for the whole run ({args.threads} threads)")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"report: {args.out / 'report.html'}")
    if args.json:
        import json

        args.json.write_text(json.dumps({"seconds": took, "audio_seconds": seconds,
                                         "summary": summary}, indent=1, default=float))


if __name__ == "__main__":
    main()
