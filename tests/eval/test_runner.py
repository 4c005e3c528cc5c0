"""`evaluate` and `audiotok eval`: results equal to the library's encode/decode, bad items with
their reasons, resumption (rerun, torn last line, kill -9), settings bound to the folder."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiotok.audio import read_audio
from audiotok.errors import AudiotokError
from audiotok.eval import EvalSettings, evaluate
from audiotok.eval.results import RESULTS, ResultsDir, example_path, read_results
from tests.pipeline.conftest import S2_MODEL, SPEECH, XC_MODEL

FAST = ("snr", "si_sdr", "mel_distance", "pesq_wb", "stoi")
TIMING = ("encode_seconds", "decode_seconds")


def results_by_key(out: Path) -> dict:
    return {(r["id"], r["system"]): r for r in read_results(out)}


def without_timing(rows: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f not in TIMING} for k, r in rows.items()}


@pytest.fixture(scope="module")
def run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "out"
    summary = evaluate(corpus, [S2_MODEL, XC_MODEL, "opus:6k", "resample:16k", "identity"], out,
                       metrics=FAST, examples=1, progress=False)
    return out, summary


def test_results_equal_the_library(run, corpus, s2_codec, xc_codec):
    out, summary = run
    rows = results_by_key(out)
    assert len(rows) == 7 * 5
    names = ["s2_tiny", "xcodec2_tiny", "opus:6k", "resample:16k", "identity"]
    assert list(summary["systems"]) == names
    for codec, name in ((s2_codec, "s2_tiny"), (xc_codec, "xcodec2_tiny")):
        for f in ("a/one.wav", "a/two.flac", "b/three.wav"):
            r = rows[(f, name)]
            codes = codec.encode(corpus / f)
            tokens = np.load(out / "tokens" / name / f"{r['index']:08d}.npy")
            assert np.array_equal(tokens, codes.tokens[0].numpy())  # exactly the library's
            assert r["frames"] == tokens.shape[1]
    # the report's example (item 0) is the library's reconstruction, sample for sample
    src0 = next(k[0] for k, r in rows.items() if r["index"] == 0)
    expected = s2_codec.decode(s2_codec.encode(corpus / src0))[0, 0].numpy()
    audio, rate = read_audio(example_path(out, "s2_tiny", 0))
    assert rate == s2_codec.sample_rate and np.array_equal(audio[0], expected)


def test_bad_items_and_short_items(run):
    out, summary = run
    rows = results_by_key(out)
    for name, reason in (("bad/garbage.wav", "cannot read audio"), ("bad/empty.wav", "empty"),
                         ("bad/nan.wav", "NaN")):
        for system in ("s2_tiny", "opus:6k", "identity"):
            assert reason in rows[(name, system)]["error"]
    short = rows[("four.wav", "opus:6k")]
    assert short["skipped"]["pesq_wb"] == "too short: 0.100 s (needs 0.25 s)"
    assert "stoi" in short["skipped"] and "snr" in short["metrics"]
    for s in summary["systems"].values():
        assert (s["items"], s["errors"]) == (4, 3)
        assert s["metrics"]["snr"]["count"] == 4 and s["metrics"]["pesq_wb"]["count"] == 3
        assert s["metrics"]["pesq_wb"]["skipped"] == {
            "too short: 0.100 s (needs 0.25 s)": 1}


def test_baselines_and_summary(run):
    out, summary = run
    sysd = summary["systems"]
    assert sysd["identity"]["metrics"]["mel_distance"]["mean"] == 0
    assert sysd["identity"]["metrics"]["snr"]["mean"] > 150
    assert 6 < sysd["opus:6k"]["bitrate_kbps"] < 8.5  # nominal 6 plus Ogg page framing
    ok = [r for (_, name), r in results_by_key(out).items() if name == "s2_tiny" and
          "error" not in r]
    bits = sum(r["frames"] for r in ok) * (8 + 9 * 6)  # tiny model: 256 + 9 x 64 codes
    assert sysd["s2_tiny"]["bitrate_kbps"] == pytest.approx(
        bits / sum(r["duration"] for r in ok) / 1000, rel=1e-9)
    assert sysd["s2_tiny"]["bitrate_kbps"] >= 21.533203125 * 62 / 1000  # whole frames
    assert "tokens" in sysd["s2_tiny"] and "tokens" not in sysd["opus:6k"]
    assert len(sysd["s2_tiny"]["tokens"]["codebooks"]) == 10
    snr = sysd["opus:6k"]["metrics"]["snr"]
    assert snr["ci95"][0] <= snr["mean"] <= snr["ci95"][1]
    assert json.loads((out / "summary.json").read_text())["systems"].keys() == sysd.keys()
    md = (out / "report.md").read_text()
    assert "| metric | s2_tiny | xcodec2_tiny | opus:6k | resample:16k | identity |" in md
    assert "| s2_tiny | pesq_wb | 1 | too short: 0.100 s (needs 0.25 s) |" in md
    assert "| s2_tiny | stoi | 1 | too short: 0.100 s (needs 0.5 s) |" in md
    assert "cannot read audio" in md


def test_rerun_skips_and_torn_line_is_measured_again(corpus, tmp_path):
    out = tmp_path / "out"
    kw = dict(metrics=("snr", "pesq_wb"), examples=0, progress=False)
    evaluate(corpus, ["opus:12k", "resample:16k"], out, **kw)
    first = results_by_key(out)
    again = evaluate(corpus, ["opus:12k", "resample:16k"], out, **{**kw, "examples": 1})
    assert (again["run"]["measured"], again["run"]["failed"], again["run"]["done_before"]) == \
        (0, 0, 14)
    assert results_by_key(out) == first
    # examples asked for on a rerun are made for the report then
    for name in ("original", "opus:12k", "resample:16k"):
        assert example_path(out, name, 0).exists()
    assert (out / "report.html").read_text().count("<audio") == 3
    data = (out / RESULTS).read_bytes()
    lines = data.splitlines(keepends=True)
    (out / RESULTS).write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    third = evaluate(corpus, ["opus:12k", "resample:16k"], out, **kw)
    assert third["run"]["measured"] + third["run"]["failed"] == 1
    assert len((out / RESULTS).read_bytes().splitlines()) == 14
    assert without_timing(results_by_key(out)) == without_timing(first)
    # a line broken in the middle of the file is not silently dropped
    (out / RESULTS).write_bytes(b"{not json\n" + data)
    with pytest.raises(AudiotokError, match="line 1 is not JSON"):
        evaluate(corpus, ["opus:12k", "resample:16k"], out, **kw)


def test_other_settings_are_refused(corpus, tmp_path):
    out = tmp_path / "out"
    evaluate(corpus, ["resample:16k"], out, metrics=("snr",), examples=0, progress=False)
    with pytest.raises(AudiotokError, match=r"other settings \(metrics: \[\"snr\"\] -> "
                                            r"\[\"si_sdr\"\]\)"):
        evaluate(corpus, ["resample:16k"], out, metrics=("si_sdr",), progress=False)
    with pytest.raises(AudiotokError, match="systems: "):
        evaluate(corpus, ["resample:8k"], out, metrics=("snr",), progress=False)
    with pytest.raises(AudiotokError, match="num_items: 7 -> 2"):
        evaluate(corpus, ["resample:16k"], out, metrics=("snr",), limit=2, progress=False)
    s = evaluate(corpus, ["resample:8k"], out, metrics=("snr",), overwrite=True, examples=0,
                 progress=False)
    assert list(s["systems"]) == ["resample:8k"] and s["run"]["done_before"] == 0
    held = ResultsDir(out, json.loads((out / "run.json").read_text()))  # a run in progress
    try:
        with pytest.raises(AudiotokError, match="another eval run"):
            evaluate(corpus, ["resample:8k"], out, metrics=("snr",), progress=False)
    finally:
        held.close()


def test_bad_settings(corpus, tmp_path):
    with pytest.raises(AudiotokError, match="unknown metric"):
        EvalSettings(metrics=("pesq",))
    with pytest.raises(AudiotokError, match="Opus bitrate must be 6k to 256k"):
        evaluate(corpus, ["opus:3k"], tmp_path / "o", progress=False)
    with pytest.raises(AudiotokError, match="expected a number like 6k"):
        evaluate(corpus, ["resample:fast"], tmp_path / "o", progress=False)
    with pytest.raises(AudiotokError, match="share a name"):
        evaluate(corpus, ["opus:6k", "opus:6k"], tmp_path / "o", progress=False)
    with pytest.raises(AudiotokError, match="no models"):
        evaluate(corpus, [], tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_precision_study(corpus, tmp_path, s2_codec):
    import audiotok

    out = tmp_path / "out"
    s = evaluate(corpus, [S2_MODEL], out, metrics=("snr",), dtype="bfloat16",
                 reference_dtype="float32", examples=0, progress=False)
    rows = results_by_key(out)
    bf16 = audiotok.load(S2_MODEL, dtype="bfloat16")
    r = rows[("a/one.wav", "s2_tiny")]
    ours = bf16.encode(corpus / "a/one.wav").tokens[0].numpy()
    ref = s2_codec.encode(corpus / "a/one.wav").tokens[0].numpy()
    assert r["precision"]["tokens_equal"] == pytest.approx((ours == ref).mean())
    assert 0.3 < r["precision"]["tokens_equal"] <= 1
    assert 10 < r["precision"]["decode_snr_vs_reference"] < 100
    p = s["systems"]["s2_tiny"]["precision"]
    assert p["tokens_equal"]["count"] == 4
    assert "Precision: bfloat16 against float32" in (out / "report.md").read_text()


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "audiotok", *args], capture_output=True,
                          text=True, **kw)


def test_cli(corpus, tmp_path):
    p = cli("eval", str(corpus), "-m", "opus:6k", "-m", "identity", "-o", str(tmp_path / "o"),
            "--metrics", "snr,pesq_wb", "--examples", "0", "-q", "--json",
            str(tmp_path / "s.json"))
    assert p.returncode == 6, p.stderr  # 3 bad items x 2 systems
    assert "snr (16 kHz, higher is better)" in p.stdout
    assert "8 results measured, 6 failed" in p.stderr
    assert json.loads((tmp_path / "s.json").read_text())["systems"]["identity"]["items"] == 4
    p = cli("eval", str(corpus), "-m", "opus:6k", "-o", str(tmp_path / "o"), "--metrics", "snr")
    assert p.returncode == 101 and "other settings" in p.stderr
    p = cli("eval", str(corpus), "-o", str(tmp_path / "x"))
    assert p.returncode == 101 and "at least one --model/-m" in p.stderr
    p = cli("eval", str(corpus), "-m", "opus:6k", "-o", str(tmp_path / "x"), "--metrics", "pesq")
    assert p.returncode == 2 and "unknown metric pesq" in p.stderr


def test_cli_tokens(corpus, tmp_path, s2_codec):
    from audiotok.pipeline import tokenize

    tokenize(corpus, s2_codec, tmp_path / "tok", workers=0, progress=False)
    p = cli("eval", "--tokens", str(tmp_path / "tok"), "--json", str(tmp_path / "t.json"))
    assert p.returncode == 0, p.stderr
    assert "4 items" in p.stdout and "perplexity" in p.stdout
    assert len(json.loads((tmp_path / "t.json").read_text())["codebooks"]) == 10
    p = cli("eval", "--tokens", str(tmp_path))
    assert p.returncode == 101 and "not a tokenize output folder" in p.stderr


def test_kill_9_and_resume(tmp_path):
    """SIGKILL of the eval process mid-run, three times, then a rerun to the end: the results
    equal a clean run's (timings aside), each (item, system) once."""
    speech, rate = sf.read(SPEECH, dtype="float32")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(16):
        start = i * rate // 2
        sf.write(corpus / f"{i:02d}.wav", speech[start: start + int(1.5 * rate)], rate)
    args = ["eval", str(corpus), "-m", "opus:12k", "-m", "resample:16k", "--metrics",
            "snr,pesq_wb,stoi", "--examples", "1", "-q"]
    # the clean run in this process, as the command line's options say
    evaluate(corpus, ["opus:12k", "resample:16k"], tmp_path / "clean",
             metrics=("snr", "pesq_wb", "stoi"), examples=1, progress=False)
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for lines_before_kill in (2, 9, 20):
        p = subprocess.Popen([sys.executable, "-m", "audiotok", *args, "-o", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            f = out / RESULTS
            if f.exists() and f.read_bytes().count(b"\n") >= lines_before_kill:
                break
            time.sleep(0.01)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    final = cli(*args, "-o", str(out))
    assert final.returncode == 0, final.stderr
    import re

    measured, before = (int(x) for x in re.search(
        r"(\d+) results measured, 0 failed, (\d+) done before", final.stderr).groups())
    assert measured + before == 32 and 20 <= before < 32  # the kills came mid-run
    lines = (out / RESULTS).read_text().splitlines()
    keys = [(json.loads(x)["id"], json.loads(x)["system"]) for x in lines]
    assert len(keys) == len(set(keys)) == 32
    assert without_timing(results_by_key(out)) == without_timing(results_by_key(
        tmp_path / "clean"))
    assert not list(out.glob("**/.*.tmp"))
    shutil.rmtree(tmp_path / "clean")


@pytest.fixture
def small_disk(tmp_path):
    """A 1200 KB tmpfs (root only), grown later with remount."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(mnt)],
                       capture_output=True)
    if p.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.decode().strip()})")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_full_disk_stops_and_resumes(corpus, tmp_path, small_disk):
    """The disk fills while writing an example: the run stops with the OS error, leaves no
    temporary file and no item marked failed for it; with space again, a rerun finishes and
    equals a clean run."""
    kw = dict(metrics=("snr",), examples=3, progress=False)
    models = ["resample:16k", S2_MODEL]
    out = small_disk / "out"
    with pytest.raises(OSError, match="No space left"):
        evaluate(corpus, models, out, **kw)
    assert not list(out.glob("**/.*.tmp"))
    assert all("No space" not in r.get("error", "") for r in read_results(out))
    subprocess.run(["mount", "-o", "remount,size=20m", str(small_disk)], check=True)
    summary = evaluate(corpus, models, out, **kw)
    assert summary["run"]["done_before"] > 0
    evaluate(corpus, models, tmp_path / "clean", **kw)
    assert without_timing(results_by_key(out)) == without_timing(results_by_key(
        tmp_path / "clean"))


def test_manifest_source(corpus, tmp_path):
    """A JSONL manifest is read by tokenize's own source code: ids from the manifest."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "first", "path": str(corpus / "a/one.wav")}) + "\n"
                        + json.dumps({"id": "second", "path": str(corpus / "b/three.wav")}) + "\n")
    s = evaluate(manifest, ["opus:12k"], tmp_path / "out", metrics=("snr",), examples=0,
                 progress=False)
    assert set(results_by_key(tmp_path / "out")) == {("first", "opus:12k"),
                                                     ("second", "opus:12k")}
    assert s["systems"]["opus:12k"]["items"] == 2
