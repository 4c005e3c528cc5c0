"""Qwen3-TTS 12 Hz tokenizer encode and decode speed, float32: audiotok next to qwen-tts 0.1.1
(in a child process with the transformers 4.57.3 it pins, from .refs/qwen-tts: see .ci/run),
the same random full-size weights, interleaved round by round; the median time of each, the
real-time factor and the extra resident memory of the call; then how the reference's decode()
(300-frame chunks, 25 frames of left context) differs from one decoder pass.

    python benchmarks/qwen3_tts_speed.py --threads 2 --durations 10,60

Codes are checked equal (the reference with SDPA attention, audiotok with attention="full").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import torch
from common import ROOT, parser, report_rounds, speech, timed

sys.path.insert(0, str(ROOT))
import audiotok  # noqa: E402

RUN = ROOT / "tests" / "models" / "qwen3_tts" / "reference_run.py"
REFERENCE = ROOT / ".refs" / "qwen-tts"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--durations", default="10,60", help="audio seconds, comma-separated")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    env = {**os.environ, "PYTHONPATH": str(REFERENCE)}
    work = args.workdir / "qwen3_tts_full"
    if not (work / "model" / "model.safetensors").exists():  # the random weights, once
        work.mkdir(parents=True, exist_ok=True)
        np.savez(work / "none.npz", empty=np.zeros(0))
        subprocess.run([sys.executable, str(RUN), str(work), "full", "0", str(work / "none.npz")],
                       check=True, env=env)
    ours = audiotok.load(work / "model")
    durations = [float(s) for s in args.durations.split(",")]
    inputs = {f"audio_{int(s)}": speech(s, 24000).astype(np.float32) for s in durations}
    np.savez(work / "inputs.npz", **inputs)
    ref = subprocess.Popen([sys.executable, str(RUN), "serve", str(work / "model"),
                            str(args.threads), str(work / "inputs.npz"), str(work / "out.npz")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def reference(op: str, name: str):
        ref.stdin.write(f"{op} {name}\n")
        ref.stdin.flush()
        answer = json.loads(ref.stdout.readline())
        return answer["seconds"], answer["mb"]

    codes, timings = {}, {}
    for seconds in durations:
        name = str(int(seconds))
        x = torch.from_numpy(inputs["audio_" + name])
        times = {(impl, op): [] for impl in ("audiotok", "qwen-tts 0.1.1")
                 for op in ("encode", "decode")}
        memory = {}
        for _ in range(args.repeats + 1):  # the first round warms up and is not counted
            with torch.inference_mode():
                s_enc, mb_enc, c = timed(lambda x=x: ours.encode(x, 24000))
                s_dec, mb_dec, _ = timed(lambda c=c: ours.decode(c))
            codes[name] = c.tokens[0].numpy()
            r_enc, r_mb_enc = reference("encode", name)
            r_dec, r_mb_dec = reference("decode", name)
            for impl, op, t, mb in (("audiotok", "encode", s_enc, mb_enc),
                                    ("audiotok", "decode", s_dec, mb_dec),
                                    ("qwen-tts 0.1.1", "encode", r_enc, r_mb_enc),
                                    ("qwen-tts 0.1.1", "decode", r_dec, r_mb_dec)):
                times[impl, op].append(t)
                memory[impl, op] = mb
        timings[name] = ({k: v[1:] for k, v in times.items()}, memory)
    ref.stdin.write("quit\n")
    ref.stdin.flush()
    ref.wait(timeout=600)
    out = dict(np.load(work / "out.npz"))
    rows, facts = [], []
    for seconds in durations:
        name = str(int(seconds))
        same = np.array_equal(codes[name], out["codes_" + name].T)
        report_rounds(rows, *timings[name], same, seconds, seconds)
        with torch.inference_mode():
            audio = ours.decode(torch.from_numpy(out["codes_" + name].T))[0, 0].numpy()
        onepass = float(np.abs(audio - out["onepass_" + name]).max())
        chunked = float(np.abs(audio - out["audio_" + name]).max())
        facts.append(f"{seconds:5.1f} s: audiotok's decode against the reference's decoder "
                     f"pass {onepass:.1e}, against its decode() {chunked:.1e} (rms "
                     f"{np.sqrt(np.mean(audio ** 2)):.2f})")
        rows.append({"seconds": seconds, "op": "decode difference", "onepass_max_abs": onepass,
                     "decode_max_abs": chunked})
    print("\n".join(facts))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))

if __name__ == "__main__":
    main()
