"""A small corpus with good and bad files, and readers of a tokenize output folder."""

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import S2_TINY, XCODEC2_TINY

S2_MODEL = str(S2_TINY / "codec.pth")
XC_MODEL = str(XCODEC2_TINY / "hf")
SPEECH = Path(__file__).parents[2] / "examples" / "speech.wav"

# name -> (seconds, sample rate, channels)
GOOD = {
    "a/one.wav": (1.3, 44100, 1),
    "a/two.flac": (0.4, 16000, 1),
    "a/b/three.wav": (2.2, 48000, 2),
    "four.wav": (0.05, 22050, 1),
    "five.ogg": (1.0, 24000, 1),
    "six.wav": (3.1, 16000, 1),
    "seven.wav": (0.7, 44100, 2),
    "eight.flac": (1.9, 8000, 1),
}
BAD = {"bad/garbage.wav": "cannot read audio", "bad/empty.wav": "empty audio",
       "bad/nan.wav": "NaN"}


def make_corpus(root: Path, good=GOOD, bad=True) -> Path:
    speech, rate = sf.read(SPEECH, dtype="float32")
    for i, (name, (secs, sr, ch)) in enumerate(sorted(good.items())):
        n = int(secs * sr)
        start = (i * 7919) % (speech.size - int(secs * rate) - 1)
        src = speech[start: start + int(secs * rate) + 1]
        x = np.interp(np.arange(n) * rate / sr, np.arange(src.size), src).astype(np.float32)
        data = np.stack([x, 0.5 * x], 1) if ch == 2 else x
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, data, sr)
    if bad:
        (root / "bad").mkdir(parents=True, exist_ok=True)
        (root / "bad/garbage.wav").write_bytes(b"RIFF\x00\x00not really a wav file" * 10)
        sf.write(root / "bad/empty.wav", np.zeros(0, np.float32), 16000)
        nan = np.zeros(8000, np.float32)
        nan[100] = np.nan
        sf.write(root / "bad/nan.wav", nan, 16000, subtype="FLOAT")
    return root


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("corpus"))


def read_output(out: Path) -> dict:
    """{id: row} over every shard the manifest lists, with the shards' metadata."""
    import pyarrow.parquet as pq

    manifest = json.loads((out / "manifest.json").read_text())
    rows, metas = {}, []
    for shard in manifest["shards"]:
        table = pq.read_table(out / shard["file"])
        assert table.num_rows == shard["rows"]
        metas.append(json.loads(table.schema.metadata[b"audiotok"]))
        for r in table.to_pylist():
            assert r["id"] not in rows, f"{r['id']} twice"
            rows[r["id"]] = r
    return {"manifest": manifest, "rows": rows, "metas": metas}


def errors(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
