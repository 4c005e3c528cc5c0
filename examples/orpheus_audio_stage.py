"""The audio stage of an Orpheus TTS server: language-model ids in, PCM out, through `audiotok
serve` (a SNAC 24 kHz model loaded). Every sample of the sequence is played, equal to the
offline decode of the whole sequence; with the server's default (stateful) SNAC streams each
frame is decoded once and the first audio comes once 4 frames (28 ids) are in (a frame's worth
of final samples, 3435).

    audiotok serve -m snac-24khz &
    python examples/orpheus_audio_stage.py --ids lm_output.txt -o out.wav
    python examples/orpheus_audio_stage.py --from-audio examples/speech.wav -o out.wav

--ids reads what the language model wrote: `<custom_token_N>` text (as vLLM streams it) or
integer ids (whitespace-separated); `-` reads stdin as it comes. --from-audio plays the language
model's part with ids made from an audio file (encoded by the server, mapped to Orpheus ids).
--ids-per-second paces the ids as a language model would emit them (0: all at once)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.request

import numpy as np
import soundfile as sf

from audiotok.export.llm import scheme_for
from audiotok.server.client import DecodeStreamClient


def ids_of_audio(url: str, path: str, model: str | None, api_key: str | None) -> str:
    """Orpheus text of an audio file: the server encodes it, the ids are arithmetic."""
    http = url.replace("ws://", "http://").replace("wss://", "https://").rstrip("/")
    query = "format=json" + (f"&model={model}" if model else "")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with open(path, "rb") as f, urllib.request.urlopen(urllib.request.Request(
            f"{http}/v1/encode?{query}", data=f.read(), headers=headers)) as r:
        doc = json.load(r)
    tokens = np.asarray(doc["tokens"]).reshape(7, -1)
    return scheme_for("orpheus", (4096,) * 7).to_text(tokens)


def pieces(source: str, args):
    """The language model's output piece by piece: (kind, value), kind "text" or "ids"."""
    if source.startswith("audio:"):
        text = ids_of_audio(args.url, source[6:], args.model, args.api_key)
        yield from (("text", t + ">") for t in text.split(">")[:-1])
        return
    stream = sys.stdin if source == "-" else open(source, encoding="utf-8")  # noqa: SIM115
    with stream:
        for line in stream:
            if "<" in line:
                yield "text", line
            else:
                ids = [int(w) for w in line.split()]
                yield from (("ids", [i]) for i in ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--ids", help="a file of <custom_token_N> text or integer ids; - for stdin")
    src.add_argument("--from-audio", help="make the ids from this audio file")
    ap.add_argument("-o", "--output", required=True, help="the WAV file to write")
    ap.add_argument("--url", default="ws://127.0.0.1:8000")
    ap.add_argument("--model", help="the served model (when the server has several)")
    ap.add_argument("--ids-per-second", type=float, default=0.0,
                    help="pace the ids like a language model (e.g. 100); 0: as fast as read")
    ap.add_argument("--api-key")
    args = ap.parse_args()
    source = args.ids if args.ids is not None else "audio:" + args.from_audio

    with DecodeStreamClient(args.url, args.model, ids="orpheus", api_key=args.api_key) as s:
        rate = s.ready["sample_rate"]
        sent, first_audio, errors = [0], [None], []
        start = time.monotonic()

        def send():
            try:
                for kind, value in pieces(source, args):
                    if args.ids_per_second:
                        time.sleep(max(0.0, start + sent[0] / args.ids_per_second
                                       - time.monotonic()))
                    if kind == "text":
                        s.send_text(value)
                        sent[0] += value.count("<custom_token_")
                    else:
                        s.send_ids(value)
                        sent[0] += len(value)
                s.end()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        chunks = []
        while (pcm := s.recv(timeout=120)) is not None:
            if first_audio[0] is None:
                first_audio[0] = (time.monotonic() - start, sent[0])
            chunks.append(pcm)
        thread.join()
        if errors:
            raise SystemExit(f"error: {errors[0]}")
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        sf.write(args.output, audio, rate, subtype="FLOAT")
        took = time.monotonic() - start
        done = s.summary
    print(f"{args.output}: {done['frames']} frames, {audio.size} samples "
          f"({audio.size / rate:.2f} s) in {took:.2f} s; ids of an unfinished frame dropped: "
          f"{done['dropped_ids']}")
    if first_audio[0] is not None:
        print(f"first audio after {first_audio[0][0] * 1000:.0f} ms, {first_audio[0][1]} ids sent")


if __name__ == "__main__":
    main()
