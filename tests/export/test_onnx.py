"""ONNX export (audiotok export --format onnx) and the torch-free runtime: parity with the golden
reference, push-by-push streaming through the step graphs, the graphs' shapes and metadata, and
the errors."""

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import audiotok
from audiotok.cli import main
from audiotok.errors import AudioError, AudiotokError, CheckpointError, CodesError
from audiotok.export import OnnxSettings, export_onnx
from audiotok.runtime import OnnxCodec
from tests.bounds import AUDIO_PARITY, SAME_MODEL
from tests.conftest import S2_TINY, XCODEC2_TINY
from tests.helpers import export_onnx_cli, run_torch_free, torch_free_script

LENGTHS = (1, 2047, 2048, 2049, 30000, 132377, 352805)

# run with torch made unimportable: every golden case through the ONNX runtime, saved as .npz
TORCH_FREE = torch_free_script("""
    for n in LENGTHS:
        r[f"codes_{n}"] = codec.encode(d[f"audio_{n}"]).tokens[0]
        r[f"decoded_{n}"] = codec.decode(d[f"codes_{n}"])[0, 0]
    batch = codec.encode([d[f"batch_audio_{i}"] for i in range(3)])
    r["batch_codes"], r["batch_lengths"] = batch.tokens, batch.lengths
    r["random_decoded"] = codec.decode(d["random_codes"])[0, 0]
    rng = np.random.default_rng(0)
    tokens, pieces, i = d["codes_352805"][None], [], 0
    with codec.stream_decoder() as dec:  # pushes of 1..40 frames (the step graph takes 16)
        while i < tokens.shape[-1]:
            n = int(rng.integers(1, 41))
            pieces.append(dec.push(tokens[:, :, i:i + n]))
            i += n
        pieces.append(dec.flush())
    r["streamed"] = np.concatenate(pieces, -1)[0, 0]
    audio, pieces, i = d["audio_352805"][None], [], 0
    with codec.stream_encoder() as enc:  # pushes of 1 sample to 20 frames
        while i < audio.shape[-1]:
            n = int(rng.integers(1, 20 * 2048))
            pieces.append(enc.push(audio[:, i:i + n]))
            i += n
        pieces.append(enc.flush())
    r["stream_encoded"] = np.concatenate(pieces, -1)[0]
    from audiotok.codes import load_codes  # codes files, both ways, without torch
    batch.save(out + ".codes")
    back = load_codes(out + ".codes", arrays=True)
    assert isinstance(back.tokens, np.ndarray)
    assert back.num_samples.tolist() == [30000, 44100, 12345]
    r["batch_decoded_from_file"] = codec.decode(back)
""").replace("LENGTHS", repr(LENGTHS))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "s2_tiny_onnx"
    assert "decoder_step.onnx" in export_onnx_cli(S2_TINY / "codec.pth", out, "--step-graphs-only")
    return out


@pytest.fixture(scope="module")
def torch_free(folder, tmp_path_factory):
    return run_torch_free(TORCH_FREE, folder, S2_TINY / "expected_pth.npz",
                          tmp_path_factory.mktemp("torch_free"), "Fish Audio Research License")


def test_folder_graphs_metadata_and_dynamic_shapes(folder):
    manifest = json.loads((folder / "audiotok_onnx.json").read_text())
    # --step-graphs-only: the runtime drives the step graphs for whole inputs too
    assert set(manifest["graphs"]) == {"encoder_step", "decoder_step"}
    assert sorted(p.name for p in folder.iterdir()) == [
        "audiotok_onnx.json", "decoder_step.onnx", "encoder_step.onnx"]
    assert manifest["max_push_frames"] == 16  # the tiny model's post-quantizer window
    dims = {}
    for graph, file in manifest["graphs"].items():
        model = onnx.load(str(folder / file))
        onnx.checker.check_model(model)
        meta = {p.key: p.value for p in model.metadata_props}
        assert meta["sample_rate"] == "44100" and meta["samples_per_frame"] == "2048"
        assert meta["num_codebooks"] == "10" and meta["codec"] == "s2"
        assert meta["audiotok_version"] == audiotok.__version__
        assert "Fish Audio Research License" in meta["licence"]
        dims[graph] = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                       for i in model.graph.input]
        # no tables of the reference's 32768 positions, nor any other length-bound constant
        for init in model.graph.initializer:
            assert 32768 not in init.dims and 4096 not in init.dims, init.name
    assert dims["decoder_step"][0] == ["batch", 10, "step_frames"]
    assert dims["encoder_step"][0] == ["batch", 1, "2048*step_frames"]
    for graph in ("decoder_step", "encoder_step"):  # the state: batch first, the rest fixed
        state = manifest["state"][graph]
        assert [s["name"] for s in state] == [
            i.name for i in onnx.load(str(folder / f"{graph}.onnx")).graph.input][1:]
        assert all(d[0] == "batch" and all(isinstance(v, int) for v in d[1:])
                   for d in dims[graph][1:])
    names = [s["name"] for s in manifest["state"]["decoder_step"]]
    assert "state.quantizer.post_module.layers.1.v" in names  # windowed keys/values per layer
    assert "state.quantizer.post_module.position" in names
    assert "state.decoder.model.0.context" in names  # convolution left contexts


def test_torch_free_parity_with_the_reference(torch_free, s2_golden):
    for n in LENGTHS:
        assert np.array_equal(torch_free[f"codes_{n}"], s2_golden[f"codes_{n}"]), n
        np.testing.assert_allclose(torch_free[f"decoded_{n}"], s2_golden[f"decoded_{n}"],
                                   rtol=0, atol=1e-4)
    for i, n in enumerate(s2_golden["batch_code_lens"]):
        assert np.array_equal(torch_free["batch_codes"][i, :, :n],
                              s2_golden["batch_codes"][i, :, :n])
    assert torch_free["batch_lengths"].tolist() == s2_golden["batch_code_lens"].tolist()
    np.testing.assert_allclose(torch_free["random_decoded"], s2_golden["random_codes_decoded"],
                               rtol=0, atol=1e-4)


def test_codes_files_cross_between_runtimes(torch_free, s2_codec, tmp_path_factory):
    # the torch-free side saved its batch's Codes (numpy arrays): torch reads and decodes them
    path = next(tmp_path_factory.getbasetemp().glob("torch_free*/results.npz.codes"))
    codes = audiotok.Codes.load(path)
    assert codes.lengths.tolist() == [15, 22, 7] and codes.codec == "s2"
    assert codes.meta["runtime"] == "onnxruntime"
    ours = torch_free["batch_decoded_from_file"]
    np.testing.assert_allclose(ours, s2_codec.decode(codes).numpy(), rtol=0, atol=1e-4)
    assert ours.shape == (3, 1, 44100) and not ours[2, 0, 12345:].any()


def test_torch_free_step_graphs_stream_exactly(torch_free, s2_golden):
    offline = torch_free["decoded_352805"]
    assert torch_free["streamed"].shape == offline.shape
    np.testing.assert_allclose(torch_free["streamed"], offline, rtol=0, atol=SAME_MODEL)
    np.testing.assert_allclose(torch_free["streamed"], s2_golden["decoded_352805"], rtol=0,
                               atol=AUDIO_PARITY)
    assert np.array_equal(torch_free["stream_encoded"], s2_golden["codes_352805"])


def test_importing_audiotok_imports_no_torch():
    code = ("import sys, audiotok, audiotok.runtime, audiotok.export, audiotok.export.llm; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_same_api_as_the_torch_codec(folder, s2_codec, s2_golden):
    codec = audiotok.load(folder)
    assert isinstance(codec, OnnxCodec)
    # threads: OMP_NUM_THREADS (conftest.py sets it) unless given
    options = codec.sessions["decoder_step"].get_session_options()
    assert options.intra_op_num_threads == int(os.environ["OMP_NUM_THREADS"])
    assert OnnxCodec(folder, threads=3).sessions["decoder_step"].get_session_options() \
        .intra_op_num_threads == 3
    assert (codec.sample_rate, codec.samples_per_frame, codec.num_codebooks) == (44100, 2048, 10)
    assert codec.codebook_sizes == s2_codec.codebook_sizes
    assert codec.info()["runtime"] == "onnxruntime"
    # Codes from the torch codec decode here, trimmed to the samples they were encoded from
    codes = s2_codec.encode([s2_golden["batch_audio_0"], s2_golden["batch_audio_2"]])
    ours = codec.decode(codes)
    theirs = s2_codec.decode(codes).numpy()
    assert ours.shape == theirs.shape == (2, 1, 30000)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)
    assert not ours[1, 0, 12345:].any()
    # [K, T] tokens, resampling of other rates, stereo downmix, a file path
    assert codec.decode(s2_golden["codes_2049"]).shape == (1, 1, 4096)
    at16k = codec.encode(np.zeros(16000, np.float32), sample_rate=16000)
    assert at16k.tokens.shape == (1, 10, 22) and at16k.num_samples.tolist() == [44100]
    stereo = np.stack([s2_golden["audio_30000"]] * 2)
    assert np.array_equal(codec.encode(stereo).tokens[0], s2_golden["codes_30000"])
    # clamping as the torch codec clamps
    bad = s2_golden["codes_2049"].copy()
    bad[0, 0] = 999
    clamped = bad.copy()
    clamped[0, 0] = 255
    np.testing.assert_array_equal(codec.decode(bad, clamp=True), codec.decode(clamped))


def test_bad_inputs_get_the_torch_codecs_errors(folder, s2_golden):
    codec = audiotok.load(folder)
    with pytest.raises(CodesError, match="9 codebooks"):
        codec.decode(np.zeros((1, 9, 4), np.int64))
    with pytest.raises(CodesError, match=r"token 999 at item 0, codebook 0, frame 0"):
        codec.decode(np.full((1, 10, 4), 999))
    with pytest.raises(CodesError, match="integers"):
        codec.decode(np.zeros((1, 10, 4), np.float32))
    with pytest.raises(CodesError, match="no frames"):
        codec.decode(np.zeros((1, 10, 0), np.int64))
    with pytest.raises(CodesError, match=r"\[B, K, T\]"):
        codec.decode(np.zeros(10, np.int64))
    with pytest.raises(AudiotokError, match="decodes without voice"):
        codec.decode(np.zeros((1, 10, 4), np.int64), voice="x.voice")
    with pytest.raises(AudioError, match="NaN"):
        codec.encode(np.full(100, np.nan, np.float32))
    with pytest.raises(AudioError):
        codec.encode(b"not audio at all")
    with pytest.raises(ValueError, match="batch_size"):
        codec.stream_decoder(0)
    with codec.stream_decoder(2) as dec:
        with pytest.raises(CodesError, match=r"\[2, 10, t\]"):
            dec.push(np.zeros((1, 10, 3), np.int64))
        with pytest.raises(CodesError, match="outside"):
            dec.push(np.full((2, 10, 1), -1))
        assert dec.push(np.zeros((2, 10, 0), np.int64)).shape == (2, 1, 0)
    with pytest.raises(RuntimeError, match="with"):
        dec.push(np.zeros((2, 10, 1), np.int64))
    with codec.stream_encoder() as enc:
        with pytest.raises(AudioError, match="float"):
            enc.push(np.zeros((1, 10), np.int16))
        with pytest.raises(AudioError, match=r"\[1, n\]"):
            enc.push(np.zeros(10, np.float32))
        assert enc.push(np.zeros((1, 2047), np.float32)).shape == (1, 10, 0)
        assert enc.flush().shape == (1, 10, 1)


def test_torch_only_uses_of_an_export_folder_are_refused_clearly(folder, tmp_path):
    with pytest.raises(AudiotokError, match="takes threads= and providers=, not device, dtype"):
        audiotok.load(folder, device="cpu", dtype="bfloat16")
    for args in (["reconstruct", "examples/speech.wav", "-o", str(tmp_path / "x.wav")],
                 ["info"], ["export", str(folder), "--format", "gguf", "-o",
                            str(tmp_path / "x.gguf")]):
        r = CliRunner().invoke(main, [*args, *([] if args[0] == "export" else
                                                ["-m", str(folder)])])
        assert r.exit_code == 1 and "is an ONNX export" in r.output, r.output
        assert "Traceback" not in r.output
    assert not list(tmp_path.iterdir())


def test_broken_export_folders(folder, tmp_path):
    with pytest.raises(CheckpointError, match="unreadable"):
        OnnxCodec(tmp_path)
    (tmp_path / "audiotok_onnx.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CheckpointError, match="not an audiotok ONNX export"):
        audiotok.load(tmp_path)
    manifest = json.loads((folder / "audiotok_onnx.json").read_text())
    assert manifest["format_version"] == 2
    (tmp_path / "audiotok_onnx.json").write_text(json.dumps({**manifest, "format_version": 3}))
    with pytest.raises(CheckpointError, match="version 3, newer than this audiotok reads"):
        audiotok.load(tmp_path)
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "audiotok_onnx.json").write_bytes((folder / "audiotok_onnx.json").read_bytes())
    with pytest.raises(CheckpointError, match="missing"):
        audiotok.load(partial)


def test_export_refuses_what_it_cannot_do_and_leaves_nothing(s2_codec, xc_codec, tmp_path):
    import torch

    for settings in (OnnxSettings(max_push_frames=4), OnnxSettings(offline_graphs=False)):
        with pytest.raises(AudiotokError, match="apply to causal codecs"):
            export_onnx(xc_codec, tmp_path / "x", settings)
    with pytest.raises(AudiotokError, match="float32"):
        export_onnx(audiotok.load(S2_TINY / "codec.pth", dtype=torch.bfloat16), tmp_path / "x")
    with pytest.raises(AudiotokError, match=r"max_push_frames must be 1\.\.16"):
        export_onnx(s2_codec, tmp_path / "x", OnnxSettings(max_push_frames=17))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(AudiotokError, match="not an empty folder"):
        export_onnx(s2_codec, tmp_path / "full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # no half-made folder
    r = CliRunner().invoke(main, ["export", str(S2_TINY / "codec.pth"), "--format", "onnx",
                                  "--dtype", "f16", "-o", str(tmp_path / "y")])
    assert r.exit_code == 1 and "float32" in r.output
    r = CliRunner().invoke(main, ["export", str(XCODEC2_TINY / "hf"), "--format", "onnx",
                                  "--max-push-frames", "4", "-o", str(tmp_path / "y")])
    assert r.exit_code == 1 and "apply to causal codecs" in r.output \
        and "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]
