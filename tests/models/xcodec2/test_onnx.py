"""X-Codec2's ONNX export: its graphs (real-valued, dynamic), parity of the torch-free runtime
with the golden reference, and batches and windows as the torch codec runs them."""

import json
from dataclasses import replace

import numpy as np
import onnx
import pytest

import audiotok
from audiotok.errors import AudiotokError
from audiotok.streaming.spec import Window
from tests.conftest import XCODEC2_TINY
from tests.helpers import export_onnx_cli, run_torch_free, torch_free_script

XC_CASES = ("n8000", "n8001", "n319", "n49120", "n144000")

XC_TORCH_FREE = torch_free_script("""
    for c in XC_CASES:
        r[f"{c}_codes"] = codec.encode(d[f"{c}_waveform"]).tokens
        r[f"{c}_audio"] = codec.decode(d[f"{c}_codes"])
    r["random_codes_audio"] = codec.decode(d["random_codes"])
""").replace("XC_CASES", repr(XC_CASES))


@pytest.fixture(scope="module")
def xc_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "xcodec2_tiny_onnx"
    export_onnx_cli(XCODEC2_TINY / "hf", out)
    return out


def test_xcodec2_graphs_are_real_valued_and_dynamic(xc_folder):
    manifest = json.loads((xc_folder / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"features", "encoder", "decoder"}
    assert (manifest["window_frames"], manifest["context_frames"]) == (1500, 150)
    io = {}
    for graph, file in manifest["graphs"].items():
        model = onnx.load(str(xc_folder / file))
        onnx.checker.check_model(model)
        meta = {p.key: p.value for p in model.metadata_props}
        assert meta["codec"] == "xcodec2" and meta["sample_rate"] == "16000"
        assert "CC-BY-NC-4.0" in meta["licence"]
        ops = {node.op_type for node in model.graph.node}
        assert not ops & {"DFT", "STFT", "Col2Im"}, ops  # no spectral ops: real matrix products
        io[graph] = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                     for v in [*model.graph.input, *model.graph.output]]
    assert io["decoder"] == [["batch", 1, "frames"], ["batch", 1, "320*frames"]]
    assert io["encoder"] == [["batch", 1, "320*frames"], ["batch", "frames", 160],
                             ["batch", 1, "frames"]]


def test_xcodec2_torch_free_parity_with_the_reference(xc_folder, xc_golden, tmp_path):
    z = run_torch_free(XC_TORCH_FREE, xc_folder, XCODEC2_TINY / "cases.npz", tmp_path,
                       "CC-BY-NC-4.0")
    for c in XC_CASES:
        assert np.array_equal(z[f"{c}_codes"], xc_golden[f"{c}_codes"]), c
        np.testing.assert_allclose(z[f"{c}_audio"], xc_golden[f"{c}_audio"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(z["random_codes_audio"], xc_golden["random_codes_audio"],
                               rtol=0, atol=1e-4)


def test_xcodec2_batches_and_windows_as_the_torch_codec(xc_folder, xc_golden, tmp_path):
    import shutil

    ours = audiotok.load(xc_folder)
    items = [xc_golden["batch_waveforms"][i, 0, :n]
             for i, n in enumerate(xc_golden["batch_lengths"])]
    codes = ours.encode(items)
    for i in range(3):
        solo = xc_golden[f"batch_item{i}_codes_solo"]
        assert np.array_equal(codes.tokens[i, :, : codes.lengths[i]], solo[0])
    # long inputs: the same windows as the torch codec (made short here to keep the test small)
    small = tmp_path / "small_windows"
    shutil.copytree(xc_folder, small)
    manifest = json.loads((small / "audiotok_onnx.json").read_text())
    (small / "audiotok_onnx.json").write_text(json.dumps(
        {**manifest, "window_frames": 100, "context_frames": 20}))
    windowed = audiotok.load(small)
    reference = audiotok.load(XCODEC2_TINY / "hf")
    reference.streaming = replace(reference.streaming, long_window=Window(20, 100, 20))
    batch = [xc_golden["n144000_waveform"], items[0]]  # 451 frames: 5 windows, and a short one
    a, b = windowed.encode(batch), reference.encode(batch)
    assert np.array_equal(a.tokens, b.tokens.numpy()) and a.lengths.tolist() == [451, 105]
    np.testing.assert_allclose(windowed.decode(a), reference.decode(b).numpy(), rtol=0,
                               atol=1e-4)
    assert windowed.decode(a).shape == (2, 1, 144000)
    with pytest.raises(AudiotokError, match="not causal"):
        ours.stream_decoder()
    with pytest.raises(AudiotokError, match="not causal"):
        ours.stream_encoder()
