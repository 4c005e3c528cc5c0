"""NanoCodec's ONNX export (a small model of two rates, 6 samples a frame: quick to trace): the
manifest and graphs (the causal decoder's step graph, the non-causal encoder whole), and the
runtime against the torch codec without torch: codes equal (each item zero-padded to whole
frames, each padded length its own batch), audio within 1e-4, items of different lengths in
one call, and a decode stream through the step graph equal to the offline decode."""

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

LENGTHS = (1, 5, 6, 7, 50)

# the export's decode stream (its decoder_step graph) over ragged pushes; no encode stream
STREAMED = EACH_LENGTH_AND_A_BATCH.replace('assert sys.modules["torch"]', """
codes = codec.encode(d["audio_50"]).tokens
with codec.stream_decoder() as dec:
    r["streamed"] = np.concatenate([dec.push(codes[..., :1]), dec.push(codes[..., 1:4]),
                                    dec.push(codes[..., 4:]), dec.flush()], -1)[0, 0]
try:
    codec.stream_encoder()
except Exception as e:
    r["encoder_refusal"] = np.array(str(e))
assert sys.modules["torch"]""", 1)


def test_torch_free_runtime_equals_the_torch_codec(nano, tmp_path):
    r = nano("short")
    codec = r.codec
    out = tmp_path / "onnx"
    export_onnx_cli(r.path, out, "--step-graphs-only")  # (the decoder through its steps)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder_step"}  # (the encoder: whole)
    assert (manifest["codec"], manifest["causal"]) == ("nanocodec", True)
    meta, dims = onnx_graph_facts(out / "encoder.onnx")
    assert meta["codec"] == "nanocodec" and "NVIDIA Open Model License" in meta["licence"]
    g = torch.Generator().manual_seed(7)
    audio = {n: 0.1 * torch.randn(n, generator=g) for n in LENGTHS}
    np.savez(tmp_path / "inputs.npz", **{f"audio_{n}": x.numpy() for n, x in audio.items()})
    z = run_torch_free(STREAMED, out, tmp_path / "inputs.npz", tmp_path,
                       "NVIDIA Open Model License")
    for n, x in audio.items():
        codes = codec.encode(x, 22050)
        assert len(set(codes.tokens.flatten().tolist())) > 1 or n < 7
        assert np.array_equal(z[f"codes_{n}"], codes.tokens[0].numpy()), n
        decoded = codec.decode(codes)[0, 0].numpy()
        assert z[f"decoded_{n}"].shape == decoded.shape == (n,)
        np.testing.assert_allclose(z[f"decoded_{n}"], decoded, rtol=0, atol=1e-4)
    items = [*audio.values(), audio[LENGTHS[-1]]]
    batch = codec.encode(items, 22050)
    assert z["batch_lengths"].tolist() == [-(-x.numel() // 6) for x in items]
    assert np.array_equal(z["batch_codes"], batch.tokens.numpy())
    np.testing.assert_allclose(z["batch_audio"], codec.decode(batch).numpy(), rtol=0, atol=1e-4)
    whole = codec.decode(codec.encode(audio[50], 22050).tokens)[0, 0].numpy()
    assert z["streamed"].shape == whole.shape == (9 * 6,)
    np.testing.assert_allclose(z["streamed"], whole, rtol=0, atol=1e-4)
    assert "not causal" in str(z["encoder_refusal"])
