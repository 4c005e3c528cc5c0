"""Mimi's ONNX export: the four graphs (encoder, decoder and both step graphs with explicit
state), and the torch-free runtime against the torch codec: tokens equal,
audio within 1e-4, batches, and the step graphs driven push by push equal to offline; whole
inputs driven through the step graphs (what an export with --step-graphs-only runs) equal the
whole-input graphs' results."""

import json

import numpy as np
import onnx
import pytest
import torch

from tests.bounds import SAME_MODEL
from tests.helpers import export_onnx_cli, onnx_graph_facts, run_torch_free, torch_free_script
from tests.models.mimi.conftest import speechy

FRAME = 1920
LENGTHS = (1, 1919, 1920, 1921, 24007, 76800)  # 76 800: 40 frames, ten attention windows

TORCH_FREE = torch_free_script("""
    for n in LENGTHS:
        r[f"codes_{n}"] = codec.encode(d[f"audio_{n}"]).tokens[0]
        r[f"decoded_{n}"] = codec.decode(d[f"torch_codes_{n}"])[0, 0]
    batch = codec.encode([d["audio_1921"], d["audio_76800"], d["audio_24007"]])
    r["batch_codes"], r["batch_lengths"] = batch.tokens, batch.lengths
    try:  # the graphs decode the codebooks they were exported with
        codec.decode(d["torch_codes_24007"][:2])
    except CodesError as e:
        r["few_codebooks_error"] = np.array(str(e))
    rng = np.random.default_rng(0)
    tokens, pieces, i = d["torch_codes_76800"][None], [], 0
    with codec.stream_decoder() as dec:  # pushes of 1..9 frames (a step graph takes 4)
        while i < tokens.shape[-1]:
            n = int(rng.integers(1, 10))
            pieces.append(dec.push(tokens[:, :, i:i + n]))
            i += n
        pieces.append(dec.flush())
    r["streamed"] = np.concatenate(pieces, -1)[0, 0]
    audio, pieces, i = d["audio_76800"], [], 0  # [1, n]
    with codec.stream_encoder() as enc:  # pushes of 1 sample to 5 frames
        while i < audio.shape[-1]:
            n = int(rng.integers(1, 5 * 1920))
            pieces.append(enc.push(audio[:, i:i + n]))
            i += n
        pieces.append(enc.flush())
    r["stream_encoded"] = np.concatenate(pieces, -1)[0]
""").replace("LENGTHS", repr(LENGTHS))


@pytest.fixture(scope="module")
def mimi_onnx(mimi_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "mimi_small_onnx"
    export_onnx_cli(mimi_files[3], out)
    return out


def test_graphs_state_and_metadata(mimi_onnx):
    manifest = json.loads((mimi_onnx / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder", "encoder_step", "decoder_step"}
    assert manifest["max_push_frames"] == 4  # the small config's window: context 8 at 25 Hz
    assert (manifest["codec"], manifest["padding"], manifest["causal"]) == ("mimi", "frame", True)
    dims = {}
    for graph, file in manifest["graphs"].items():
        meta, dims[graph] = onnx_graph_facts(mimi_onnx / file)
        assert meta["codec"] == "mimi" and meta["sample_rate"] == "24000"
        assert meta["num_codebooks"] == "4" and "CC-BY 4.0" in meta["licence"]
    assert dims["decoder"] == [["batch", 4, "frames"]]
    assert dims["encoder"] == [["batch", 1, "1920*frames"]]
    assert dims["decoder_step"][0] == ["batch", 4, "step_frames"]
    assert dims["encoder_step"][0] == ["batch", 1, "1920*step_frames"]
    for graph in ("decoder_step", "encoder_step"):  # explicit state: batch first, the rest fixed
        state = manifest["state"][graph]
        assert [s["name"] for s in state] == [
            i.name for i in onnx.load(str(mimi_onnx / f"{graph}.onnx")).graph.input][1:]
        assert all(d[0] == "batch" and all(isinstance(v, int) for v in d[1:])
                   for d in dims[graph][1:])
    names = [s["name"] for s in manifest["state"]["decoder_step"]]
    assert "state.decoder_transformer.layers.1.v" in names  # windowed keys/values per layer
    assert "state.decoder_transformer.position" in names
    assert "state.upsample.context" in names  # the transposed convolutions' tails
    names = [s["name"] for s in manifest["state"]["encoder_step"]]
    assert "state.downsample.started" in names  # the replicate padding's first-sample flag


def test_torch_free_runtime_equals_the_torch_codec(mimi_onnx, mimi_codec, tmp_path):
    inputs = {f"audio_{n}": speechy(n, 40 + i)[0].numpy() for i, n in enumerate(LENGTHS)}
    for n in LENGTHS:
        inputs[f"torch_codes_{n}"] = mimi_codec.encode(torch.from_numpy(inputs[f"audio_{n}"]),
                                                       24000).tokens[0].numpy()
    np.savez(tmp_path / "inputs.npz", **inputs)
    z = run_torch_free(TORCH_FREE, mimi_onnx, tmp_path / "inputs.npz", tmp_path, "CC-BY 4.0")
    for n in LENGTHS:
        codes = inputs[f"torch_codes_{n}"]
        assert codes.shape == (4, -(-n // FRAME))
        assert np.array_equal(z[f"codes_{n}"], codes), n
        audio = mimi_codec.decode(torch.from_numpy(codes)[None])[0, 0].numpy()
        assert z[f"decoded_{n}"].shape == audio.shape
        np.testing.assert_allclose(z[f"decoded_{n}"], audio, rtol=0, atol=1e-4)
    assert z["batch_lengths"].tolist() == [2, 40, 13]
    for i, n in enumerate((1921, 76800, 24007)):
        k = -(-n // FRAME)
        assert np.array_equal(z["batch_codes"][i, :, :k], inputs[f"torch_codes_{n}"])
    assert "tokens have 2 codebooks" in str(z["few_codebooks_error"])
    # the step graphs, push by push, equal offline
    offline = mimi_codec.decode(torch.from_numpy(inputs["torch_codes_76800"])[None])[0, 0]
    assert z["streamed"].shape == offline.shape
    np.testing.assert_allclose(z["streamed"], offline.numpy(), rtol=0, atol=1e-4)
    assert np.array_equal(z["stream_encoded"], inputs["torch_codes_76800"])


def test_whole_inputs_through_the_step_graphs_equal_the_offline_graphs(mimi_onnx):
    from audiotok.runtime import OnnxCodec

    offline, steps = OnnxCodec(mimi_onnx, threads=1), OnnxCodec(mimi_onnx, threads=1)
    del steps.sessions["encoder"], steps.sessions["decoder"]  # as an export without them
    audio = [speechy(n, i)[0, 0].numpy() for i, n in enumerate((1921, FRAME * 23 + 7, 500))]
    codes = offline.encode(audio, 24000)
    got = steps.encode(audio, 24000)
    assert np.array_equal(got.tokens, codes.tokens) and got.lengths.tolist() == [2, 24, 1]
    want = offline.decode(codes)
    assert np.abs(steps.decode(codes) - want).max() <= SAME_MODEL


def test_layer_padding_exports_graphs_of_any_number_of_samples(mimi_files, tmp_path):
    """padding=layer (transformers' convention): the encoder step graph takes any number of
    samples, so a last partial frame is padded per convolution, as the torch codec pads it
    (the last frame differs from frame padding's), whole inputs and streams alike."""
    import audiotok
    from audiotok.runtime import OnnxCodec

    model, out = f"{mimi_files[3]}?padding=layer", tmp_path / "onnx"
    export_onnx_cli(model, out, "--step-graphs-only")
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder_step", "decoder_step"}
    assert (manifest["padding"], manifest["encode_input"]) == ("layer", "samples")
    codec, onnx = audiotok.load(model), OnnxCodec(out, threads=1)
    audio = [speechy(n, 60 + i)[0, 0].numpy() for i, n in enumerate((1, 1919, 1921, 24007))]
    wants = [codec.encode(torch.from_numpy(x), 24000).tokens.numpy() for x in audio]
    for x, want in zip(audio, wants, strict=True):
        assert np.array_equal(onnx.encode(x, 24000).tokens, want), x.size
    frame = audiotok.load(mimi_files[3]).encode(torch.from_numpy(audio[2]), 24000).tokens
    assert not np.array_equal(wants[2], frame.numpy())  # the conventions differ here
    pieces, i, rng = [], 0, np.random.default_rng(1)
    with onnx.stream_encoder() as enc:
        while i < audio[3].size:
            n = int(rng.integers(1, 3 * FRAME))
            pieces.append(enc.push(audio[3][None, i:i + n]))
            i += n
        pieces.append(enc.flush())
    assert np.array_equal(np.concatenate(pieces, -1), wants[3])
