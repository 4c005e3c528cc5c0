"""The audiotok command, run in-process with click's runner (and once as a real process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from click.testing import CliRunner

from audiotok.cli import main
from tests.bounds import SAME_MODEL
from tests.conftest import S2_TINY

MODEL = str(S2_TINY / "codec.pth")
SPEECH = Path(__file__).parents[1] / "examples" / "speech.wav"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def files_under(d):
    return sorted(str(p.relative_to(d)) for p in Path(d).rglob("*") if p.is_file())


def test_reconstruct_example(tmp_path):
    out = tmp_path / "speech_s2.wav"
    r = run("reconstruct", SPEECH, "-o", out, "--model", MODEL)
    assert r.exit_code == 0, r.output
    assert "frames x 10 codebooks" in r.stdout and "real-time factor" in r.stdout
    audio, rate = sf.read(out)
    src = sf.info(SPEECH)
    assert rate == 44100 and audio.shape == (round(src.frames * 44100 / src.samplerate),)
    assert 0.01 < np.sqrt(np.mean(audio**2)) < 1
    r = run("reconstruct", SPEECH, "-o", tmp_path / "x.flac", "--model", MODEL,
            "--sample-rate", 16000)
    assert r.exit_code == 0 and sf.info(tmp_path / "x.flac").samplerate == 16000


def test_encode_tree_with_a_bad_file(tmp_path, s2_golden):
    src = tmp_path / "in"
    (src / "a" / "b").mkdir(parents=True)
    sf.write(src / "a" / "one.wav", s2_golden["audio_30000"], 44100, subtype="FLOAT")
    sf.write(src / "a" / "b" / "two.flac", s2_golden["audio_2049"], 44100)
    (src / "bad.wav").write_bytes(b"not audio at all")
    (src / "notes.txt").write_text("ignored")
    r = run("encode", src, "-o", tmp_path / "out", "--model", MODEL)
    assert r.exit_code == 1
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert any("bad.wav: cannot read audio" in e for e in errors)
    assert "1 of 3 files failed" in errors[-1]
    assert files_under(tmp_path / "out") == ["a/b/two.codes", "a/one.codes"]
    from audiotok.codes import load_codes

    codes = load_codes(tmp_path / "out" / "a" / "one.codes")
    assert codes.tokens[0].tolist() == s2_golden["codes_30000"].tolist()


def test_encode_npy_then_decode(tmp_path, s2_golden, s2_codec):
    sf.write(tmp_path / "a.wav", s2_golden["audio_132377"], 44100, subtype="FLOAT")
    assert run("encode", tmp_path / "a.wav", "-o", tmp_path / "a.npy", "--format", "npy",
               "-m", MODEL).exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), s2_golden["codes_132377"])
    r = run("decode", tmp_path / "a.npy", "-o", tmp_path / "a_dec.wav", "-m", MODEL,
            "--subtype", "FLOAT")
    assert r.exit_code == 0, r.output
    audio, rate = sf.read(tmp_path / "a_dec.wav", dtype="float32")
    assert rate == 44100 and audio.size == 65 * 2048
    assert np.abs(audio - s2_golden["decoded_132377"]).max() <= 1e-4


def test_decode_codes_trims_to_input_length(tmp_path, s2_golden):
    sf.write(tmp_path / "a.wav", s2_golden["audio_30000"], 44100)
    run("encode", tmp_path / "a.wav", "-o", tmp_path / "a.codes", "-m", MODEL)
    assert run("decode", tmp_path / "a.codes", "-o", tmp_path / "d", "-m", MODEL).exit_code == 0
    assert sf.info(tmp_path / "d" / "a.wav").frames == 30000


def test_decode_bad_codes_leaves_nothing(tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((3, 10, 4), np.int64))
    np.save(tmp_path / "range.npy", np.full((10, 4), 5000, np.int64))
    r = run("decode", tmp_path / "bad.npy", tmp_path / "range.npy", "-o", tmp_path / "out",
            "-m", MODEL)
    assert r.exit_code == 1
    assert "integer tokens [K, T]" in r.stderr
    assert "token 5000 at item 0, codebook 0, frame 0" in r.stderr
    assert not (tmp_path / "out").exists() or files_under(tmp_path / "out") == []
    r = run("decode", tmp_path / "range.npy", "-o", tmp_path / "c.wav", "-m", MODEL, "--clamp")
    assert r.exit_code == 0 and sf.info(tmp_path / "c.wav").frames == 4 * 2048


def test_info(tmp_path, s2_golden):
    r = run("info", "--model", MODEL, "--json")
    facts = json.loads(r.stdout)["model"]
    assert facts["sample_rate"] == 44100 and facts["num_codebooks"] == 10
    assert facts["frame_rate"] == 44100 / 2048 and facts["parameters"] > 1_000_000
    assert "non-commercial" in facts["weights_licence"]
    sf.write(tmp_path / "a.wav", s2_golden["audio_30000"], 44100)
    run("encode", tmp_path / "a.wav", "-o", tmp_path / "a.codes", "-m", MODEL)
    r = run("info", tmp_path / "a.codes")
    assert r.exit_code == 0
    assert "frames: [15]" in r.stdout and "durations_s: [0.68]" in r.stdout
    (tmp_path / "junk.codes").write_bytes(b"junk")
    assert run("info", tmp_path / "junk.codes").exit_code == 1


def test_info_load_options_without_model_apply_to_the_default(monkeypatch):
    import audiotok.cli.common

    monkeypatch.setattr(audiotok.cli.common, "DEFAULT_MODEL", MODEL)
    r = run("info", "--codebooks", "8")  # S2 takes no such option: it must reach the load
    assert r.exit_code == 1 and "codebooks" in r.stderr


def test_missing_model_is_one_line(tmp_path):
    r = run("encode", SPEECH, "-o", tmp_path / "x.codes", "-m", tmp_path / "nope.pth")
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1 and "nope.pth" in r.stderr


@pytest.mark.parametrize("entry", [["-m", "audiotok"]])
def test_module_entry_point(entry):
    out = subprocess.run([sys.executable, *entry, "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("encode", "decode", "reconstruct", "info"):
        assert command in out.stdout


def test_decode_batch_codes_file_writes_one_file_per_item(tmp_path, s2_codec, s2_golden):
    codes = s2_codec.encode([s2_golden["batch_audio_0"], s2_golden["batch_audio_2"]])
    codes.save(tmp_path / "b.codes")
    r = run("decode", tmp_path / "b.codes", "-o", tmp_path / "b.wav", "-m", MODEL)
    assert r.exit_code == 0, r.output
    assert sf.info(tmp_path / "b_0.wav").frames == 30000
    assert sf.info(tmp_path / "b_1.wav").frames == 12345


XC_MODEL = str(Path(__file__).parent / "data" / "xcodec2_tiny" / "hf")


def test_xcodec2_commands(tmp_path, xc_golden):
    sf.write(tmp_path / "a.wav", xc_golden["n49120_waveform"], 16000, subtype="FLOAT")
    r = run("reconstruct", tmp_path / "a.wav", "-o", tmp_path / "r.wav", "-m", XC_MODEL)
    assert r.exit_code == 0, r.output
    assert "154 frames x 1 codebooks (0.80 kbit/s)" in r.stdout
    assert sf.info(tmp_path / "r.wav").samplerate == 16000
    assert sf.info(tmp_path / "r.wav").frames == 49120
    assert run("encode", tmp_path / "a.wav", "-o", tmp_path / "a.npy", "--format", "npy",
               "-m", XC_MODEL).exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), xc_golden["n49120_codes"][0])
    r = run("decode", tmp_path / "a.npy", "-o", tmp_path / "d.wav", "-m", XC_MODEL,
            "--subtype", "FLOAT")
    audio, _ = sf.read(tmp_path / "d.wav", dtype="float32")
    assert np.abs(audio - xc_golden["n49120_audio"][0, 0]).max() <= 1e-4
    facts = json.loads(run("info", "-m", XC_MODEL, "--json").stdout)["model"]
    assert facts["codec"] == "xcodec2" and facts["frame_rate"] == 50.0


def test_decode_stream_from_stdin_to_stdout(s2_codec, s2_golden):
    codes = s2_golden["codes_30000"]
    text = "# one frame per line\n" + "\n".join(" ".join(map(str, f)) for f in codes.T) + "\n"
    r = CliRunner().invoke(main, ["decode", "--stream", "-", "-o", "-", "-m", MODEL],
                           input=text, catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    pcm = np.frombuffer(r.stdout_bytes, dtype="<f4")
    assert pcm.size == 15 * 2048
    assert np.abs(pcm - s2_golden["decoded_30000"]).max() <= 1e-4
    r = CliRunner().invoke(main, ["decode", "--stream", "-", "-o", "-", "-m", MODEL,
                                  "--subtype", "PCM_16", "--push-frames", "4"], input=text)
    assert np.frombuffer(r.stdout_bytes, dtype="<i2").size == 15 * 2048


def test_decode_stream_codes_file(tmp_path, s2_golden):
    sf.write(tmp_path / "a.wav", s2_golden["audio_30000"], 44100, subtype="FLOAT")
    run("encode", tmp_path / "a.wav", "-o", tmp_path / "a.codes", "-m", MODEL)
    r = run("decode", "--stream", tmp_path / "a.codes", "-o", tmp_path / "s.wav", "-m", MODEL,
            "--subtype", "FLOAT", "--push-frames", "3")
    assert r.exit_code == 0, r.output
    run("decode", tmp_path / "a.codes", "-o", tmp_path / "o.wav", "-m", MODEL, "--subtype", "FLOAT")
    streamed, _ = sf.read(tmp_path / "s.wav", dtype="float32")
    offline, _ = sf.read(tmp_path / "o.wav", dtype="float32")
    assert streamed.size == offline.size == 30000
    assert np.abs(streamed - offline).max() <= SAME_MODEL


def test_decode_stream_errors(tmp_path):
    r = CliRunner().invoke(main, ["decode", "--stream", "-", "-o", str(tmp_path / "x.wav"), "-m",
                                  MODEL], input="1 2 3\n")
    assert r.exit_code == 1 and "stdin line 1: expected 10 integers" in r.stderr
    assert list(tmp_path.iterdir()) == []
    r = CliRunner().invoke(main, ["decode", "--stream", "-", "-o", "-", "-m", XC_MODEL],
                           input="5\n")
    assert r.exit_code == 1 and "not causal" in r.stderr


def test_bench(tmp_path):
    r = run("bench", "-m", MODEL, "--seconds", "0.5", "--batch", "1,2", "--repeats", "1",
            "--stream", "--json", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "b.json").read_text())
    tasks = [(row["task"], row["batch"]) for row in rows]
    assert tasks == [("encode", 1), ("decode", 1), ("stream/1", 1), ("stream/4", 1),
                     ("encode", 2), ("decode", 2), ("stream/1", 2), ("stream/4", 2)]
    for row in rows:
        assert row["median_s"] > 0 and row["peak_mb"] > 0
        assert abs(row["rtf"] * row["audio_s_per_s"] - row["batch"]) < 1e-3 * row["batch"]
    assert "audio s/s" in r.stdout and r.stdout.count("\n") == 10
    bad = run("bench", "-m", MODEL, "--dtype", "int8")
    assert bad.exit_code != 0 and "unknown dtype" in bad.output


def test_a_wrong_product_rule_is_refused_at_once(monkeypatch, tmp_path):
    """AUDIOTOK_CPU_GEMM (nn/kernels) other than onednn or mkl, AUDIOTOK_KERNELS naming no
    file: usage errors, before any model loads; right values run."""
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", "openblas")
    r = run("info", "--model", MODEL)
    assert r.exit_code == 2 and "AUDIOTOK_CPU_GEMM must be onednn or mkl, got 'openblas'" in \
        r.output
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", "MKL")
    assert run("info", "--codecs").exit_code == 0
    monkeypatch.setenv("AUDIOTOK_KERNELS", str(tmp_path / "missing.json"))
    r = run("info", "--codecs")
    assert r.exit_code == 2 and "AUDIOTOK_KERNELS must be 'default' or a kernel rules file" in \
        r.output


def test_bench_kernels_measures_and_keeps_the_rules(monkeypatch, tmp_path):
    """`bench --kernels` prints the measured rules beside this CPU's defaults, `--json` writes
    them (with their timings) for AUDIOTOK_KERNELS, `--save` keeps them for this machine;
    `--save` alone is refused."""
    from audiotok.nn.kernels import calibrate, ruleset

    measured = ruleset.Rules("mkl", packed=False, short_conv_rows=32, source="calibrated")
    monkeypatch.setattr(calibrate, "calibrate",
                        lambda log=None: (log("products: oneDNN / MKL 1.50 -> mkl") or measured,
                                          {"cpu": "test"}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    threads = torch.get_num_threads()  # (the command sets it in this process)
    r = run("bench", "--kernels", "--threads", threads, "--json", tmp_path / "rules.json",
            "--save")
    assert r.exit_code == 0, r.output
    assert "products: oneDNN / MKL 1.50 -> mkl" in r.output
    assert "short_conv_rows          32" in r.output and "(default " in r.output
    assert ruleset.read_rules(tmp_path / "rules.json").short_conv_rows == 32
    saved = ruleset.calibration_file(threads=threads)
    assert saved.is_file() and f"saved: {saved}" in r.output
    r = run("bench", "--save")
    assert r.exit_code == 2 and "--save goes with --kernels" in r.output


def test_the_command_turns_on_huge_pages_before_torch_loads():
    """`audiotok` sets THP_MEM_ALLOC_ENABLE=1 (PyTorch's allocator reads it once, so before
    torch is imported), keeping a value the environment gives; the library sets nothing."""
    code = ("import os, sys; import audiotok{}; "
            "print(os.environ.get('THP_MEM_ALLOC_ENABLE'), 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    for module, given, want in ((".cli", None, "1 False"), (".cli", "0", "0 False"),
                                ("", None, "None False")):
        run_env = env if given is None else {**env, "THP_MEM_ALLOC_ENABLE": given}
        out = subprocess.run([sys.executable, "-c", code.format(module)], env=run_env,
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == want, (module, given, out.stdout)
