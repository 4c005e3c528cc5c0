"""BiCodec's ONNX export (the small model): encoder, speaker and decoder graphs with the numpy
front end named in the manifest, and the runtime against the torch codec without torch: both
token kinds equal, audio within 1e-4, items of different lengths in one call; decoding without
the global tokens is refused as the torch codec refuses it, and so is a manifest whose front
end is not one of the family's functions."""

import json

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import CheckpointError
from tests.helpers import export_onnx_cli, onnx_graph_facts, run_torch_free, torch_free_script

pytest.importorskip("onnxruntime")

LENGTHS = (400, 719, 720, 16000, 100007)  # (the last: a reference clip cut at 6 s)

SCRIPT = torch_free_script("""
    lengths = [int(k[6:]) for k in d if k.startswith("audio_")]
    batch = codec.encode([d[f"audio_{n}"] for n in lengths + lengths[-1:]])
    r["codes"], r["lengths"], r["globals"] = batch.tokens, batch.lengths, batch.globals
    r["audio"] = codec.decode(batch)
    try:
        codec.decode(batch.tokens)
    except CodesError as e:
        r["refusal"] = np.array(str(e))
""")


def test_torch_free_runtime_equals_the_torch_codec(spark, tmp_path):
    r = spark("tiny")
    codec = r.codec
    out = tmp_path / "onnx"
    export_onnx_cli(r.folder, out)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "speaker", "decoder"}
    assert (manifest["global_tokens"], manifest["frontend"]) == (32, ".frontend:encode_inputs")
    assert manifest["frontend_settings"] == {"ref_samples": 96000, "normalize_volume": True}
    meta, dims = onnx_graph_facts(out / "decoder.onnx")
    assert "NON-COMMERCIAL" in meta["licence"] and dims == [["batch", 1, "frames"], ["batch", 32]]
    g = torch.Generator().manual_seed(7)
    audio = {n: 0.1 * torch.randn(n, generator=g) for n in LENGTHS}
    np.savez(tmp_path / "inputs.npz", **{f"audio_{n}": x.numpy() for n, x in audio.items()})
    z = run_torch_free(SCRIPT, out, tmp_path / "inputs.npz", tmp_path, "NON-COMMERCIAL")
    batch = codec.encode([*audio.values(), audio[LENGTHS[-1]]])
    assert z["lengths"].tolist() == batch.lengths.tolist()
    assert np.array_equal(z["codes"], batch.tokens.numpy())
    assert np.array_equal(z["globals"], batch.globals.numpy())
    np.testing.assert_allclose(z["audio"], codec.decode(batch).numpy(), rtol=0, atol=1e-4)
    assert "32 global tokens" in str(z["refusal"])
    # a manifest naming any other front end than its family's own functions is refused
    manifest["frontend"] = "os:system"
    (out / "audiotok_onnx.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="is not a function of the bicodec family"):
        audiotok.load(out)
