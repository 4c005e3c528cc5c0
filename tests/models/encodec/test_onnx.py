"""EnCodec's ONNX export, full size (24 kHz at 6 kbit/s, Bark's and VALL-E's): the manifest and
graphs (the LSTMs as ONNX LSTM nodes, the reflection at the end inside the encoder graph, so the
runtime feeds each length as it is), and the runtime against the torch codec without torch:
codes equal, audio within 1e-4, items of different lengths in one call. (The 32 kHz model's
graphs are the same code with the other padding split; benchmarks/codecs/onnx_speed.py --codec
encodec-32khz checks their parity: an export takes 13-18 s, one is tested here.)"""

import json

import numpy as np
import pytest
import torch

from tests.helpers import (
    EACH_LENGTH_AND_A_BATCH,
    export_onnx_cli,
    onnx_graph_facts,
    run_torch_free,
    torch_free_script,
)

pytest.importorskip("onnxruntime")


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
    z = run_torch_free(EACH_LENGTH_AND_A_BATCH, out, tmp_path / "inputs.npz", tmp_path,
                       "not stated")
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


TORCH_FREE_48KHZ = torch_free_script("""
    lengths = sorted(int(k[6:]) for k in d if k.startswith("audio_"))
    for n in lengths:
        codes = codec.encode(d[f"audio_{n}"])
        r[f"codes_{n}"], r[f"scales_{n}"] = codes.tokens[0], codes.scales[0]
        r[f"decoded_{n}"] = codec.decode(codes)[0]
    batch = codec.encode([d[f"audio_{n}"] for n in lengths] + [d["mono"]])
    r["batch_codes"], r["batch_scales"] = batch.tokens, batch.scales
    r["batch_lengths"], r["batch_audio"] = batch.lengths, codec.decode(batch)
    r["unscaled"] = codec.decode(batch.tokens[-2])[0]
""")


def test_48khz_stereo_segments_through_the_runtime(enc48_ref, tmp_path):
    """The 48 kHz model's graphs take one segment each (the encoder gives its scale too); the
    runtime cuts, scales and overlap-adds as the torch codec does: codes equal, scales within
    1e-6, audio within 1e-4, for one segment, the 149 + 1 and 150 + 1 frame layouts, three
    segments, a mono input and a batch, and codes without scales decoded unscaled."""
    import audiotok

    out = tmp_path / "onnx"
    export_onnx_cli(enc48_ref.th, out)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert (manifest["channels"], manifest["frame_rule"]) == (2, "segments:48000:47520")
    codec = audiotok.load(enc48_ref.th)
    g = torch.Generator().manual_seed(8)
    audio = {n: 0.2 * torch.randn(2, n, generator=g) for n in (1, 319, 47600, 47700, 96500)}
    mono = 0.2 * torch.randn(3000, generator=g)
    np.savez(tmp_path / "inputs.npz", mono=mono.numpy(),
             **{f"audio_{n}": x.numpy() for n, x in audio.items()})
    z = run_torch_free(TORCH_FREE_48KHZ, out, tmp_path / "inputs.npz", tmp_path, "not stated")
    for n, x in audio.items():
        codes = codec.encode(x, 48000)
        assert np.array_equal(z[f"codes_{n}"], codes.tokens[0].numpy()), n
        np.testing.assert_allclose(z[f"scales_{n}"], codes.scales[0].numpy(), rtol=1e-6)
        decoded = codec.decode(codes)[0].numpy()
        assert z[f"decoded_{n}"].shape == decoded.shape == (2, n)
        np.testing.assert_allclose(z[f"decoded_{n}"], decoded, rtol=0, atol=1e-4)
    batch = codec.encode([*audio.values(), mono], 48000)
    assert z["batch_lengths"].tolist() == [1, 1, 150, 151, 305, 10]
    assert np.array_equal(z["batch_codes"], batch.tokens.numpy())
    np.testing.assert_allclose(z["batch_scales"], batch.scales.numpy(), rtol=1e-6)
    np.testing.assert_allclose(z["batch_audio"], codec.decode(batch).numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(z["unscaled"], codec.decode(batch.tokens[-2])[0].numpy(), rtol=0,
                               atol=1e-4)
