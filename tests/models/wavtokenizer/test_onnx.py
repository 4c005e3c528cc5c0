"""WavTokenizer's ONNX export (the small model at 40 frames/s): the manifest and graphs (the
reflection at the end inside the encoder graph, the attention over every frame inside the
decoder's), and the runtime against the torch codec without torch: codes equal, audio within
1e-4, items of different lengths in one call (each length its own batch, as the torch codec
runs them)."""

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


LENGTHS = (1, 599, 600, 601, 1967, 24000)


def test_torch_free_runtime_equals_the_torch_codec(wt_refs, tmp_path):
    r = wt_refs("tiny_40")
    codec, hop = r.codec, 600
    out = tmp_path / "onnx"
    export_onnx_cli(r.ckpt, out)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder"}
    assert (manifest["codec"], manifest["causal"], manifest["encode_input"]) == \
        ("wavtokenizer", False, "samples")
    meta, dims = onnx_graph_facts(out / "encoder.onnx")
    assert meta["codec"] == "wavtokenizer" and "MIT" in meta["licence"]
    assert dims == [["batch", 1, "samples"]]
    g = torch.Generator().manual_seed(7)
    audio = {n: 0.1 * torch.randn(n, generator=g) for n in LENGTHS}
    np.savez(tmp_path / "inputs.npz", **{f"audio_{n}": x.numpy() for n, x in audio.items()})
    z = run_torch_free(EACH_LENGTH_AND_A_BATCH, out, tmp_path / "inputs.npz", tmp_path,
                       "MIT licence")
    for n, x in audio.items():
        codes = codec.encode(x, 24000)
        assert np.array_equal(z[f"codes_{n}"], codes.tokens[0].numpy()), n
        decoded = codec.decode(codes)[0, 0].numpy()
        assert z[f"decoded_{n}"].shape == decoded.shape == (n,)
        np.testing.assert_allclose(z[f"decoded_{n}"], decoded, rtol=0, atol=1e-4)
    items = [*audio.values(), audio[LENGTHS[-1]]]
    batch = codec.encode(items, 24000)
    assert z["batch_lengths"].tolist() == [-(-x.numel() // hop) for x in items]
    assert np.array_equal(z["batch_codes"], batch.tokens.numpy())
    np.testing.assert_allclose(z["batch_audio"], codec.decode(batch).numpy(), rtol=0, atol=1e-4)
