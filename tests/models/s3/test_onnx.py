"""The S3 tokenizer's ONNX export (encode only): its graphs (real-valued, dynamic), and the
torch-free runtime's codes equal to the torch codec's at the length rules, over 30 s (the
windows and both merges), in ragged batches; short inputs and decode refused clearly."""

import json
import shutil

import numpy as np
import pytest

import audiotok
from tests.helpers import export_onnx_cli, onnx_graph_facts, run_torch_free, torch_free_script
from tests.models.s3 import reference

# the fewest samples, a 50 Hz token's edge, 159/161 mel frames, 30 s and a frame (two windows),
# 53 s (the last window inside the overlap: the s3tokenizer merge loses its tokens)
LENGTHS = (201, 641, 25440, 25760, 480160, 848000)

S3_TORCH_FREE = torch_free_script("""
    from audiotok.errors import AudioError, AudiotokError
    for n in LENGTHS:
        r[f"codes_{n}"] = codec.encode(d[f"wave_{n}"], 16000).tokens
    batch = codec.encode([d["wave_25760"], d["wave_641"], d["wave_25440"]], 16000)
    r["batch_tokens"], r["batch_lengths"] = batch.tokens, batch.lengths
    try:
        codec.encode(d["wave_201"][:200], 16000)
    except AudioError as e:
        r["short"] = np.array(str(e))
    try:
        codec.decode(batch)
    except AudiotokError as e:
        r["decode"] = np.array(str(e))
""").replace("LENGTHS", repr(LENGTHS))


@pytest.fixture(scope="module", params=["v1", "v2_25hz"])
def s3_export(request, tmp_path_factory):
    """(variant, the torch codec, its ONNX export folder, the inputs .npz)."""
    try:
        reference.import_s3tokenizer()
    except ImportError as e:
        pytest.skip(f"the S3 test oracle is not installed (see tests/install_references.sh): {e}")
    variant, tmp = request.param, tmp_path_factory.mktemp(f"s3_{request.param}_onnx")
    pt = reference.save_pt(reference.reference_model(variant, small=True), tmp / "m.pt")
    audiotok.load(pt, variant=variant).save_pretrained(tmp / "codec")
    codec = audiotok.load(tmp / "codec")
    export_onnx_cli(tmp / "codec", tmp / "onnx")
    np.savez(tmp / "inputs.npz", **{f"wave_{n}": reference.speech_like(n, seed=n).numpy()
                                    for n in LENGTHS})
    return variant, codec, tmp / "onnx", tmp / "inputs.npz"


def test_graphs_are_real_valued_and_dynamic_and_encode_only(s3_export):
    variant, codec, folder, _ = s3_export
    manifest = json.loads((folder / "audiotok_onnx.json").read_text())
    assert manifest["graphs"] == {"features": "features.onnx", "encoder": "encoder.onnx"}
    assert manifest["frame_rule"] == "hop:160" and manifest["min_samples"] == 201
    assert manifest["feature_windows"] == {"window": 3000, "stride": 2600,
                                           "per_token": 2 if variant == "v1" else 4,
                                           "trim": 100 if variant == "v1" else 50,
                                           "merge": "trim"}
    assert manifest["decode_refusal"] == codec.decode_refusal
    import onnx

    for graph, file in manifest["graphs"].items():
        meta, dims = onnx_graph_facts(folder / file)
        assert meta["codec"] == "s3" and meta["sample_rate"] == "16000"
        ops = {n.op_type for n in onnx.load(str(folder / file)).graph.node}
        assert not ops & {"DFT", "STFT"}, ops  # the STFT as real matrix products
        want = [["batch", 1, "samples"]] if graph == "features" else [["batch", 128, "frames"]]
        assert dims == want, graph


def test_torch_free_codes_equal_the_torch_codec(s3_export, tmp_path):
    variant, codec, folder, inputs = s3_export
    z = run_torch_free(S3_TORCH_FREE, folder, inputs, tmp_path, "FunAudioLLM")
    d = np.load(inputs)
    for n in LENGTHS:
        want = codec.encode(d[f"wave_{n}"], 16000)
        assert z[f"codes_{n}"].shape[-1] == int(want.lengths[0]) == codec.num_frames(n), n
        assert np.array_equal(z[f"codes_{n}"], want.tokens.numpy()), n
    # a ragged batch: each item's codes its codes alone
    for i, n in enumerate((25760, 641, 25440)):
        k = int(z["batch_lengths"][i])
        assert k == codec.num_frames(n)
        assert np.array_equal(z["batch_tokens"][i, :, :k], z[f"codes_{n}"][0]), n
    assert "200 samples is too short" in str(z["short"]) and "201" in str(z["short"])
    assert "token-to-audio" in str(z["decode"])


@pytest.mark.parametrize("s3_export", ["v2_25hz"], indirect=True)  # (the plan is generic)
def test_the_lossless_merge_and_small_windows_as_the_torch_codec(s3_export, tmp_path):
    """The manifest's windows drive the runtime: lossless merge, and windows made short here
    (as the torch codec with the same plan), so that a 6 s input crosses several joints."""
    import copy
    from dataclasses import replace

    variant, codec, folder, inputs = s3_export
    codec = copy.copy(codec)  # (its plan changes below)
    edited = tmp_path / "edited"
    shutil.copytree(folder, edited)
    manifest = json.loads((edited / "audiotok_onnx.json").read_text())
    plan = replace(codec.feature_windows, window=300, stride=260, trim=5, merge="lossless")
    (edited / "audiotok_onnx.json").write_text(json.dumps(
        {**manifest, "feature_windows": plan.to_dict()}))
    ours = audiotok.load(edited)
    for merge in ("lossless", "trim"):
        ours.feature_windows = codec.feature_windows = replace(plan, merge=merge)
        for n in (25760, 79000, 96160):  # 79000: a last window of 10 frames (3 tokens)
            w = reference.speech_like(n, seed=n).numpy()
            got, want = ours.encode(w, 16000), codec.encode(w, 16000)
            assert got.tokens.shape[-1] == want.tokens.shape[-1] == codec.num_frames(n)
            assert np.array_equal(got.tokens, want.tokens.numpy()), (merge, n)
