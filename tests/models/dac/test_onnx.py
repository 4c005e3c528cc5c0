"""DAC's ONNX export (the small model with the 16 kHz strides, so the decoder's T x 320 - 8
length is exercised): the manifest and graphs, and the runtime against the torch codec without
torch: codes equal, audio within 1e-4 and of the same length, items of different lengths in one
call; the "layer" padding is refused."""

import json

import numpy as np
import pytest
import torch

from tests.helpers import export_onnx_cli, onnx_graph_facts, run_torch_free, torch_free_script

pytest.importorskip("onnxruntime")
LENGTHS = (1, 319, 320, 321, 967, 7000)

TORCH_FREE = torch_free_script("""
    for n in LENGTHS:
        r[f"codes_{n}"] = codec.encode(d[f"audio_{n}"]).tokens[0]
        r[f"decoded_{n}"] = codec.decode(codec.encode(d[f"audio_{n}"]))[0, 0]
        r[f"raw_{n}"] = codec.decode(d[f"torch_codes_{n}"])[0, 0]
    batch = codec.encode([d["audio_967"], d["audio_7000"], d["audio_1"]])
    r["batch_codes"], r["batch_lengths"] = batch.tokens, batch.lengths
    r["batch_audio"] = codec.decode(batch)
""").replace("LENGTHS", repr(LENGTHS))


@pytest.fixture(scope="module")
def dac_onnx(dac_refs, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "dac_odd_onnx"
    export_onnx_cli(dac_refs("tiny_odd").pth, out)
    return out


def test_torch_free_runtime_equals_the_torch_codec(dac_onnx, dac_refs, tmp_path):
    import audiotok

    manifest = json.loads((dac_onnx / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder"}
    assert (manifest["codec"], manifest["causal"], manifest["decode_trim"]) == ("dac", False, 8)
    meta, dims = onnx_graph_facts(dac_onnx / "decoder.onnx")
    assert meta["codec"] == "dac" and "MIT" in meta["licence"]
    assert dims == [["batch", 12, "frames"]]
    codec = audiotok.load(dac_refs("tiny_odd").pth)
    g = torch.Generator().manual_seed(5)
    inputs = {f"audio_{n}": (0.2 * torch.randn(n, generator=g)).numpy() for n in LENGTHS}
    for n in LENGTHS:
        inputs[f"torch_codes_{n}"] = codec.encode(torch.from_numpy(inputs[f"audio_{n}"]),
                                                  16000).tokens[0].numpy()
    np.savez(tmp_path / "inputs.npz", **inputs)
    z = run_torch_free(TORCH_FREE, dac_onnx, tmp_path / "inputs.npz", tmp_path, "MIT")
    for n in LENGTHS:
        codes = inputs[f"torch_codes_{n}"]
        assert np.array_equal(z[f"codes_{n}"], codes), n
        raw = codec.decode(torch.from_numpy(codes)[None])[0, 0].numpy()
        assert raw.shape[-1] == 320 * codes.shape[-1] - 8
        np.testing.assert_allclose(z[f"raw_{n}"], raw, rtol=0, atol=1e-4)
        trimmed = codec.decode(codec.encode(torch.from_numpy(inputs[f"audio_{n}"]), 16000))
        assert z[f"decoded_{n}"].shape == (min(n, raw.shape[-1]),)
        np.testing.assert_allclose(z[f"decoded_{n}"], trimmed[0, 0].numpy(), rtol=0, atol=1e-4)
    assert z["batch_lengths"].tolist() == [4, 22, 1]
    want = codec.decode(codec.encode([torch.from_numpy(inputs[f"audio_{n}"])
                                      for n in (967, 7000, 1)], 16000)).numpy()
    np.testing.assert_allclose(z["batch_audio"], want, rtol=0, atol=1e-4)


def test_layer_padding_is_not_exported(dac_refs, tmp_path):
    import audiotok
    from audiotok.errors import AudiotokError
    from audiotok.export import export_onnx

    with pytest.raises(AudiotokError, match="padding='frame'"):
        export_onnx(audiotok.load(dac_refs("tiny").pth, padding="layer"), tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
