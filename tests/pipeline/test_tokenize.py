"""audiotok tokenize / audiotok.pipeline.tokenize with the local engine."""

import csv
import json
import shutil
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import audiotok
from audiotok.cli import main
from audiotok.errors import AudiotokError
from audiotok.pipeline import tokenize
from audiotok.pipeline.batching import buckets
from tests.pipeline.conftest import BAD, GOOD, S2_MODEL, XC_MODEL, errors, read_output


def check_against_solo(codec, corpus, rows):
    """Every row equals the item encoded alone from its file."""
    for item_id, r in rows.items():
        codes = codec.encode(str(corpus / item_id))
        k, t = codec.num_codebooks, int(codes.lengths[0])
        assert r["num_codebooks"] == k and r["n_frames"] == t, item_id
        tokens = np.asarray(r["tokens"]).reshape(k, t)
        np.testing.assert_array_equal(tokens, codes.tokens[0].numpy(), err_msg=item_id)
        assert r["n_samples"] == codes.meta["source_num_samples"][0]
        assert r["sample_rate"] == codes.meta["source_sample_rate"][0]
        assert r["duration"] == pytest.approx(r["n_samples"] / r["sample_rate"])


@pytest.mark.parametrize("model", [S2_MODEL, XC_MODEL], ids=["s2", "xcodec2"])
def test_folder_equals_single_item_encode(corpus, tmp_path, model):
    codec = audiotok.load(model)
    s = tokenize(corpus, codec, tmp_path / "out", batch_seconds=3.0, shard_items=4, workers=1,
                 progress=False)
    assert (s.items, s.tokenized, s.failed, s.failed_total, s.complete) == (11, 8, 3, 3, True)
    assert s.audio_hours == pytest.approx(sum(v[0] for v in GOOD.values()) / 3600, rel=1e-3)
    out = read_output(tmp_path / "out")
    assert sorted(out["rows"]) == sorted(GOOD)
    check_against_solo(codec, corpus, out["rows"])
    m = out["manifest"]
    assert m["complete"] and m["num_shards"] == 3 and [s["index"] for s in m["shards"]] == [0, 1, 2]
    assert m["codec"] == codec.name and m["rows"] == 8 and m["failed"] == 3
    meta = out["metas"][0]
    assert meta["model_sha256"] == m["model_sha256"] and meta["settings"]["batch_seconds"] == 3.0
    assert meta["audiotok_version"] == audiotok.__version__
    top = max(codec.codebook_sizes) - 1  # tiny S2: 8-bit codebooks; X-Codec2: 65536 codes
    expected_type = "uint8" if top < 256 else "uint16"
    schema = pq.read_schema(tmp_path / "out" / m["shards"][0]["file"])
    assert str(schema.field("tokens").type) == f"list<element: {expected_type}>"
    got = {e["id"]: e["reason"] for e in errors(tmp_path / "out")}
    assert sorted(got) == sorted(BAD)
    for item_id, reason in BAD.items():
        assert reason in got[item_id], got[item_id]


def test_rerun_skips_and_settings_are_checked(corpus, tmp_path, s2_codec):
    out = tmp_path / "out"
    tokenize(corpus, s2_codec, out, shard_items=4, workers=0, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    again = tokenize(corpus, s2_codec, out, shard_items=4, workers=0, progress=False)
    assert (again.tokenized, again.failed, again.done_before, again.failed_total) == (0, 0, 11, 3)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    shutil.copytree(corpus, tmp_path / "moved")  # the same items elsewhere: still resumable
    moved = tokenize(tmp_path / "moved", s2_codec, out, shard_items=4, workers=0, progress=False)
    assert (moved.done_before, moved.tokenized) == (11, 0)
    with pytest.raises(AudiotokError, match=r"other settings \(settings.shard_items|shard_items"):
        tokenize(corpus, s2_codec, out, shard_items=5, workers=0, progress=False)
    with pytest.raises(AudiotokError, match="model_sha256"):
        tokenize(corpus, XC_MODEL, out, shard_items=4, workers=0, progress=False)
    s = tokenize(corpus, s2_codec, out, shard_items=5, workers=0, progress=False, overwrite=True)
    assert s.tokenized == 8 and read_output(out)["manifest"]["num_shards"] == 3


def test_cli_exit_status_summary_and_npy(corpus, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["tokenize", str(corpus), "-m", S2_MODEL, "-o", str(out),
                                  "--npy", "--workers", "0", "-q", "--json",
                                  str(tmp_path / "s.json")])
    assert r.exit_code == 3, r.output  # three bad files
    assert "8 items tokenized" in r.stderr and "3 failed" in r.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["tokenized"] == 8 and summary["hours_per_hour"] > 0
    rows = read_output(out)["rows"]
    for item_id in GOOD:
        npy = np.load(out / "npy" / (item_id.rsplit(".", 1)[0] + ".npy"))
        assert npy.dtype == np.int64 and npy.shape[0] == 10
        np.testing.assert_array_equal(npy.reshape(-1), rows[item_id]["tokens"])
    r = CliRunner().invoke(main, ["tokenize", str(corpus), "-m", S2_MODEL, "-o", str(out), "-q",
                                  "--dtype", "bfloat16"])
    assert r.exit_code == 101 and "--overwrite" in r.stderr and "dtype" in r.stderr


def test_manifests_with_ids_and_text(corpus, tmp_path, s2_codec):
    names = ["a/one.wav", "six.wav", "bad/nan.wav"]
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"utt{i}", "path": str(corpus / n),
                                         "text": f"text {i}"}) + "\n"
                             for i, n in enumerate(names)))
    s = tokenize(jsonl, s2_codec, tmp_path / "j", workers=0, progress=False)
    assert (s.tokenized, s.failed) == (2, 1)
    rows = read_output(tmp_path / "j")["rows"]
    assert sorted(rows) == ["utt0", "utt1"] and rows["utt1"]["text"] == "text 1"
    assert rows["utt0"]["path"] == str(corpus / "a/one.wav")
    assert errors(tmp_path / "j")[0]["id"] == "utt2"
    table = tmp_path / "list" / "m.csv"  # relative paths resolve against the manifest's folder
    table.parent.mkdir()
    with open(table, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "speaker"])
        w.writerows([[f"../{corpus.name}/{n}", "x"] for n in names[:2]])
    (tmp_path / corpus.name).symlink_to(corpus)
    s = tokenize(table, s2_codec, tmp_path / "c", workers=0, progress=False)
    rows = read_output(tmp_path / "c")["rows"]
    assert sorted(rows) == [f"../{corpus.name}/a/one.wav", f"../{corpus.name}/six.wav"]
    assert all(r["text"] is None for r in rows.values())


@pytest.mark.parametrize("text, message", [
    ('{"path": "x.wav"}\n{"path": "x.wav"}\n', "duplicate id 'x.wav'"),
    ('{"id": 1}\n', "no 'path' value"),
    ('not json\n', "not valid JSON"),
    ('', "lists no items"),
])
def test_bad_manifests(tmp_path, s2_codec, text, message):
    m = tmp_path / "m.jsonl"
    m.write_text(text)
    with pytest.raises(AudiotokError, match=message):
        tokenize(m, s2_codec, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("model", [S2_MODEL, XC_MODEL], ids=["s2", "xcodec2"])
def test_cpu_default_is_one_item_per_batch(corpus, tmp_path, model):
    """On the CPU, items are encoded one at a time by default (batch_seconds 0): the same rows
    as batched encoding, in item order."""
    codec = audiotok.load(model)
    tokenize(corpus, codec, tmp_path / "one", shard_items=4, workers=0, progress=False)
    tokenize(corpus, codec, tmp_path / "batched", batch_seconds=3.0, shard_items=4, workers=0,
             progress=False)
    one, batched = read_output(tmp_path / "one"), read_output(tmp_path / "batched")
    assert one["metas"][0]["settings"]["batch_seconds"] == 0.0
    assert sorted(one["rows"]) == sorted(batched["rows"])
    for item_id, r in one["rows"].items():
        assert r["tokens"] == batched["rows"][item_id]["tokens"], item_id
    # continuing without --batch-seconds keeps the earlier run's batches (no settings clash)
    s = tokenize(corpus, codec, tmp_path / "batched", shard_items=4, workers=0, progress=False)
    assert s.complete and s.tokenized == 0
    assert read_output(tmp_path / "batched")["manifest"]["settings"]["batch_seconds"] == 3.0


def test_bad_arguments(corpus, tmp_path, s2_codec):
    with pytest.raises(AudiotokError, match="engine"):
        tokenize(corpus, s2_codec, tmp_path / "o", engine="spark")
    with pytest.raises(AudiotokError, match="batch_seconds must not be negative"):
        tokenize(corpus, s2_codec, tmp_path / "o", batch_seconds=-1)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(AudiotokError, match="not empty and not a tokenize output"):
        tokenize(corpus, s2_codec, tmp_path / "full", progress=False)
    with pytest.raises(AudiotokError, match="no audio files"):
        tokenize(tmp_path / "full", s2_codec, tmp_path / "o", progress=False)


def test_min_seconds(corpus, tmp_path, s2_codec):
    s = tokenize(corpus, s2_codec, tmp_path / "o", min_seconds=0.5, workers=0, progress=False)
    assert s.failed == 5  # three bad files, four.wav (0.05 s), two.flac (0.4 s)
    reasons = {e["id"]: e["reason"] for e in errors(tmp_path / "o")}
    assert reasons["four.wav"].startswith("too short: 0.050 s")


def test_datasets_source(corpus, tmp_path, s2_codec):
    datasets = pytest.importorskip("datasets")
    names = ["a/one.wav", "five.ogg", "bad/garbage.wav"]
    ds = datasets.Dataset.from_dict({
        "audio": [{"bytes": (corpus / n).read_bytes(), "path": n} for n in names],
        "id": ["x", "y", "z"], "text": ["hello", None, "bye"]})
    ds = ds.cast_column("audio", datasets.Audio(decode=False)).cast_column("audio",
                                                                           datasets.Audio())
    ds.save_to_disk(str(tmp_path / "ds"))
    s = tokenize(tmp_path / "ds", s2_codec, tmp_path / "o", workers=1, progress=False)
    assert (s.tokenized, s.failed) == (2, 1)
    rows = read_output(tmp_path / "o")["rows"]
    assert rows["x"]["text"] == "hello" and rows["x"]["path"] == "one.wav"  # as datasets stores it
    solo = s2_codec.encode(str(corpus / "five.ogg"))
    np.testing.assert_array_equal(rows["y"]["tokens"], solo.tokens[0].numpy().reshape(-1))


@given(st.lists(st.integers(1, 500), min_size=1, max_size=40), st.integers(1, 2000))
def test_buckets_cover_each_index_once_within_budget(lengths, budget):
    batches = buckets(lengths, budget)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) == 1 or longest * len(b) <= budget
        assert [lengths[i] for i in b] == sorted(lengths[i] for i in b)


def test_script_without_main_guard(corpus, tmp_path):
    """Reader processes do not re-run the calling script (a plain script, or code on stdin)."""
    code = (f"from audiotok.pipeline import tokenize\n"
            f"s = tokenize({str(corpus)!r}, {S2_MODEL!r}, {str(tmp_path / 'out')!r}, "
            f"workers=2, shard_items=4, progress=False)\n"
            f"print('tokenized', s.tokenized, s.failed)\n")
    script = tmp_path / "plain.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "tokenized 8 3" in r.stdout, r.stderr[-2000:]
    shutil.rmtree(tmp_path / "out")
    r = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "tokenized 8 3" in r.stdout, r.stderr[-2000:]
