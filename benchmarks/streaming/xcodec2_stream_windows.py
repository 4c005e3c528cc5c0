"""X-Codec2 streaming decode by windowed re-decoding: how far each window setting is from
offline decode, and what it costs. X-Codec2 attends to the whole input, so no window is exact.
Any non-causal codec's windows measure the same way with --model (e.g. DAC's, exact with 10
frames of context each side).

    python benchmarks/streaming/xcodec2_stream_windows.py --seconds 10 --threads 2
    python benchmarks/streaming/xcodec2_stream_windows.py --model DAC_CHECKPOINT --seconds 10 \
        --grid "10,10,10;5,10,5;3,10,3;10,10,3;10,10,1;3,10,1"

Tokens: the shipped speech sample (looped to --seconds) encoded by the model. For each
(left, chunk, lookahead) in frames: SNR and max abs difference of the streamed audio against
offline decode of all tokens, total length check (must equal the offline decode's), frames decoded
per frame output, and the frames a stream needs before its first audio (chunk + lookahead).
Default model: the full-size configuration with random weights (written once to --workdir);
--model takes a real checkpoint where one is available.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py, models.py
from common import parser, speech

import audiotok
from audiotok.server import Engine, EngineSettings, WindowSettings

GRID = ("0,25,0;10,25,5;10,25,10;25,25,5;25,25,10;50,25,5;50,25,10;50,25,25;100,25,10;"
        "50,50,10;100,50,25;150,50,50")


def stream_decode(codec, tokens: torch.Tensor, window: WindowSettings) -> tuple[np.ndarray, int]:
    """The stream's audio and the frames its windows decoded."""
    engine = Engine({"m": codec}, EngineSettings(window=window, max_backlog_seconds=1e6),
                    start=False)
    s = engine.open_decode_stream("m")
    s.push(tokens)
    s.finish()
    streamer = engine.models["m"].runners["decode"].streamer  # a WindowStreamer
    decoded = 0
    decode = streamer._decode

    def counting(windows):
        nonlocal decoded
        decoded += sum(t.shape[-1] for _, t, _, _, _ in windows)
        return decode(windows)

    streamer._decode = counting
    while engine.step():
        pass
    return np.concatenate(list(s)), decoded


def snr_db(ref: np.ndarray, x: np.ndarray) -> float:
    noise = np.sum((ref - x) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref**2) / noise))


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", help="checkpoint (default: X-Codec2, random full-size weights)")
    p.add_argument("--grid", default=GRID, help="left,chunk,lookahead;... window settings")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        from models import random_weights

        args.model = str(random_weights("xcodec2", args.workdir))
    codec = audiotok.load(args.model)
    tokens = codec.encode(speech(args.seconds, codec.input_rate), codec.input_rate).tokens[0]
    frames = tokens.shape[1]
    offline = codec.decode(tokens[None])[0, 0].numpy()
    rows = []
    print(f"{frames} frames; offline decode: {offline.size} samples")
    print("| left | chunk | lookahead | SNR dB | max abs | length ok | decoded/output | "
          "frames before first audio |")
    print("|---|---|---|---|---|---|---|---|")
    grid = [tuple(int(v) for v in w.split(",")) for w in args.grid.split(";")]
    for left, chunk, look in grid:
        audio, decoded = stream_decode(codec, tokens, WindowSettings(left, chunk, look))
        row = {"left": left, "chunk": chunk, "lookahead": look,
               "snr_db": snr_db(offline, audio),
               "max_abs": float(np.abs(offline - audio).max()),
               "length_ok": audio.size == offline.size,
               "decoded_per_output": decoded / frames, "first_audio_frames": chunk + look}
        rows.append(row)
        print(f"| {left} | {chunk} | {look} | {row['snr_db']:.1f} | {row['max_abs']:.2e} | "
              f"{row['length_ok']} | {row['decoded_per_output']:.2f} | "
              f"{row['first_audio_frames']} |")
    if args.json:
        args.json.write_text(json.dumps({"frames": frames, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
