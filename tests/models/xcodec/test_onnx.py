"""The Higgs Audio v2 tokenizer's ONNX export (the small model): the manifest and graphs (the
resampling, HuBERT and the pad path inside the encoder graph), and the runtime against the
torch codec without torch: codes equal on and off the pad path, audio within 1e-4, items of
different lengths in one call (each length its own batch, as the torch codec runs them)."""

import json

import numpy as np
import pytest
import torch

from tests.helpers import (
    EACH_LENGTH_AND_A_BATCH,
    export_onnx_cli,
    onnx_graph_facts,
    run_torch_free,
)

pytest.importorskip("onnxruntime")

# samples: the shortest, then around the pad path (N mod 960 in 119..631) after a frame or more
LENGTHS = (119, 1078, 1079, 1591, 1592, 24000, 24500)


def test_torch_free_runtime_equals_the_torch_codec(higgs, tmp_path):
    r = higgs("tiny")
    codec = r.codec
    out = tmp_path / "onnx"
    export_onnx_cli(r.folder, out)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder"}
    assert (manifest["codec"], manifest["causal"], manifest["encode_input"]) == \
        ("xcodec", False, "samples")
    meta, dims = onnx_graph_facts(out / "encoder.onnx")
    assert meta["codec"] == "xcodec" and "Boson Higgs Audio 2" in meta["licence"]
    assert meta["padding"] == "boson" and dims == [["batch", 1, "samples"]]
    g = torch.Generator().manual_seed(7)
    audio = {n: 0.1 * torch.randn(n, generator=g) for n in LENGTHS}
    np.savez(tmp_path / "inputs.npz", **{f"audio_{n}": x.numpy() for n, x in audio.items()})
    z = run_torch_free(EACH_LENGTH_AND_A_BATCH, out, tmp_path / "inputs.npz", tmp_path,
                       "Boson Higgs Audio 2")
    for n, x in audio.items():
        codes = codec.encode(x, 24000)
        assert np.array_equal(z[f"codes_{n}"], codes.tokens[0].numpy()), n
        decoded = codec.decode(codes)[0, 0].numpy()
        assert z[f"decoded_{n}"].shape == decoded.shape
        np.testing.assert_allclose(z[f"decoded_{n}"], decoded, rtol=0, atol=1e-4)
    items = [*audio.values(), audio[LENGTHS[-1]]]
    batch = codec.encode(items, 24000)
    assert z["batch_lengths"].tolist() == [n // 960 + (n % 960 >= 119) for n in
                                           [x.numel() for x in items]]
    assert np.array_equal(z["batch_codes"], batch.tokens.numpy())
    np.testing.assert_allclose(z["batch_audio"], codec.decode(batch).numpy(), rtol=0, atol=1e-4)
