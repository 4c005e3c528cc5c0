"""EnCodec's ONNX export, full size (24 kHz at 6 kbit/s, Bark's and VALL-E's): the manifest and
graphs (the LSTMs as ONNX LSTM nodes, the reflection at the end inside the encoder graph, so the
runtime feeds each length as it is), and the runtime against the torch codec without torch:
codes equal, audio within 1e-4, items of different lengths in one call. (The 32 kHz model's
graphs are the same code with the other padding split; benchmarks/onnx_speed.py --codec
encodec-32khz checks their parity: an export takes 13-18 s, one is tested here.)"""

import json

import numpy as np
import pytest
import torch

from tests.helpers import export_onnx_cli, onnx_graph_facts, run_torch_free, torch_free_script

pytest.importorskip("onnxruntime")

TORCH_FREE = torch_free_script("""
    lengths = [int(k[6:]) for k in d if k.startswith("audio_")]
    for n in lengths:
        r[f"codes_{n}"] = codec.encode(d[f"audio_{n}"]).tokens[0]
        r[f"decoded_{n}"] = codec.decode(codec.encode(d[f"audio_{n}"]))[0, 0]
    batch = codec.encode([d[f"audio_{n}"] for n in lengths + lengths[-1:]])  # a length twice
    r["batch_codes"], r["batch_lengths"] = batch.tokens, batch.lengths
    r["batch_audio"] = codec.decode(batch)
""")

LENGTHS = (1, 2, 319, 320, 321, 967, 3201, 24000)


def test_torch_free_runtime_equals_the_torch_codec(enc_ref, tmp_path):
    import audiotok

    options, hop, lengths = ("--bandwidth", "6"), 320, LENGTHS
    out = tmp_path / "onnx"
    export_onnx_cli(enc_ref.th, out, *options)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder"}
    assert (manifest["codec"], manifest["causal"], manifest["encode_input"]) == \
        ("encodec", False, "samples")
    meta, dims = onnx_graph_facts(out / "encoder.onnx")
    assert meta["codec"] == "encodec" and "not stated" in meta["licence"]
    assert dims == [["batch", 1, "samples"]]
    codec = audiotok.load(enc_ref.th, bandwidth="6")
    assert manifest["num_codebooks"] == 8
    rate = codec.sample_rate
    g = torch.Generator().manual_seed(7)
    audio = {n: 0.2 * torch.randn(n, generator=g) for n in lengths}
    inputs = {f"audio_{n}": x.numpy() for n, x in audio.items()}
    np.savez(tmp_path / "inputs.npz", **inputs)
    z = run_torch_free(TORCH_FREE, out, tmp_path / "inputs.npz", tmp_path, "not stated")
    for n, x in audio.items():
        codes = codec.encode(x, rate)
        assert np.array_equal(z[f"codes_{n}"], codes.tokens[0].numpy()), n
        decoded = codec.decode(codes)[0, 0].numpy()
        assert z[f"decoded_{n}"].shape == decoded.shape == (n,)
        np.testing.assert_allclose(z[f"decoded_{n}"], decoded, rtol=0, atol=1e-4)
    items = [*audio.values(), audio[lengths[-1]]]
    batch = codec.encode(items, rate)
    assert z["batch_lengths"].tolist() == [-(-x.numel() // hop) for x in items]
    assert np.array_equal(z["batch_codes"], batch.tokens.numpy())
    np.testing.assert_allclose(z["batch_audio"], codec.decode(batch).numpy(), rtol=0, atol=1e-4)
