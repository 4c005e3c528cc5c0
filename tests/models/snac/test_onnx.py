"""SNAC's ONNX export (the tiny model with attention windows of 2 coarse frames, so the
decoder graph's edge padding is exercised): the graphs' facts, and the runtime against the torch
codec without torch: tokens equal, audio within 1e-4 with the seeded noise computed in the
graph, items of different lengths in one call; the torch noise is refused."""

import json

import numpy as np
import pytest
import torch

from tests.helpers import export_onnx_cli, onnx_graph_facts, run_torch_free, torch_free_script

pytest.importorskip("onnxruntime")
LENGTHS = (1, 47, 48, 49, 300)  # a frame is 24 samples; attention windows of 2 frames

TORCH_FREE = torch_free_script("""
    for n in LENGTHS:
        r[f"codes_{n}"] = codec.encode(d[f"audio_{n}"]).tokens[0]
        r[f"decoded_{n}"] = codec.decode(d[f"torch_codes_{n}"])[0, 0]
    batch = codec.encode([d["audio_49"], d["audio_300"], d["audio_1"]])
    r["batch_codes"], r["batch_lengths"] = batch.tokens, batch.lengths
    r["batch_audio"] = codec.decode(batch)
""").replace("LENGTHS", repr(LENGTHS))


@pytest.fixture(scope="module")
def snac_onnx(snac_pair, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "snac_tiny_onnx"
    export_onnx_cli(snac_pair["tiny_blocks"][1], out)
    return out


def test_graphs_and_metadata(snac_onnx):
    manifest = json.loads((snac_onnx / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder"}
    assert (manifest["codec"], manifest["causal"], manifest["frame_rule"]) == \
        ("snac", False, "ceil:2")
    assert (manifest["noise"], manifest["seed"]) == ("seeded", 0)
    meta, dims = onnx_graph_facts(snac_onnx / "decoder.onnx")
    assert meta["codec"] == "snac" and "MIT" in meta["licence"]
    assert dims == [["batch", 7, "frames"]]
    _, dims = onnx_graph_facts(snac_onnx / "encoder.onnx")
    assert dims == [["batch", 1, "48*blocks"]]


def test_torch_free_runtime_equals_the_torch_codec(snac_onnx, snac_codecs, tmp_path):
    codec = snac_codecs["tiny_blocks"]
    g = torch.Generator().manual_seed(5)
    inputs = {f"audio_{n}": (0.3 * torch.randn(n, generator=g)).numpy() for n in LENGTHS}
    for n in LENGTHS:
        inputs[f"torch_codes_{n}"] = codec.encode(torch.from_numpy(inputs[f"audio_{n}"])
                                                  ).tokens[0].numpy()
    np.savez(tmp_path / "inputs.npz", **inputs)
    z = run_torch_free(TORCH_FREE, snac_onnx, tmp_path / "inputs.npz", tmp_path, "MIT")
    for n in LENGTHS:
        codes = inputs[f"torch_codes_{n}"]
        assert codes.shape == (7, 2 * -(-n // 48))  # whole attention windows
        assert np.array_equal(z[f"codes_{n}"], codes), n
        audio = codec.decode(torch.from_numpy(codes)[None])[0, 0].numpy()
        np.testing.assert_allclose(z[f"decoded_{n}"], audio, rtol=0, atol=1e-4)
    assert z["batch_lengths"].tolist() == [4, 14, 2]
    want = codec.decode(codec.encode([torch.from_numpy(inputs[f"audio_{n}"])
                                      for n in (49, 300, 1)])).numpy()
    np.testing.assert_allclose(z["batch_audio"], want, rtol=0, atol=1e-4)


def test_odd_frame_counts_and_refusals(snac_onnx, snac_pair, snac_codecs, tmp_path):
    import audiotok
    from audiotok.errors import AudiotokError
    from audiotok.export import export_onnx

    codec = snac_codecs["tiny_blocks"]
    runtime = audiotok.load(snac_onnx, threads=1)
    # 5 frames, not whole attention windows: the graph pads with the last frame as torch does
    tokens = torch.randint(0, 64, (2, 7, 5), generator=torch.Generator().manual_seed(6))
    np.testing.assert_allclose(runtime.decode(tokens.numpy()), codec.decode(tokens).numpy(),
                               rtol=0, atol=1e-4)
    noisy = audiotok.load(snac_pair["tiny_blocks"][1], noise="torch")
    with pytest.raises(AudiotokError, match="torch noise .* cannot be exported"):
        export_onnx(noisy, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
