"""NeuCodec's and DistillNeuCodec's ONNX exports (16 kHz in, 24 kHz out): the manifest says both
rates, and the runtime equals the torch codec (itself equal to the neucodec package: see
test_parity.py and test_distill.py): codes identical, audio within 1e-4, each codec's length
rule (N // 320 and N // 320 + 1), input at another rate resampled to 16 kHz, padded batches,
NeuCodec's windows of long inputs, and under a frame the torch codec's error."""

import json
from dataclasses import replace

import numpy as np
import pytest

import audiotok
from audiotok.errors import AudioError
from audiotok.streaming.spec import Window
from tests.helpers import export_onnx_cli, onnx_graph_facts
from tests.models.neucodec.conftest import speech_like

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def neucodec_folder(small, tmp_path_factory):
    """The small model with the first 2 of its 16 semantic layers, saved (the transformers
    layout): an export's time grows with the graph, and the runtime's reference is the torch
    codec of the same weights."""
    from dataclasses import replace

    from audiotok.models.neucodec.codec import NeuCodecCodec
    from audiotok.models.xcodec2.model import XCodec2Model

    full = audiotok.load(small[1]).model
    config = replace(full.config, semantic=replace(full.config.semantic, num_hidden_layers=2))
    model = XCodec2Model(config)
    missing, _ = model.load_state_dict(full.state_dict(), strict=False)
    assert not missing
    folder = tmp_path_factory.mktemp("neucodec_2_layers")
    NeuCodecCodec(model.eval(), source="2 layers").save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def neucodec_onnx(neucodec_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "neucodec_small_onnx"
    export_onnx_cli(neucodec_folder, out)
    return out


@pytest.fixture(scope="module")
def distill_onnx(distill_small, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "distill_small_onnx"
    export_onnx_cli(distill_small[1], out)
    return out


def check_runtime(runtime, codec, lengths, seed: int) -> None:
    """Codes, their lengths and samples, and decoded audio equal the torch codec's, one item at
    a time and as a padded batch."""
    items = [speech_like(n, seed + i) for i, n in enumerate(lengths)]
    for x in items:
        want, got = codec.encode(x, 16000), runtime.encode(x, 16000)
        assert np.array_equal(got.tokens, want.tokens.numpy()), x.size
        assert got.num_samples.tolist() == want.num_samples.tolist(), x.size
        audio, want_audio = runtime.decode(got), codec.decode(want).numpy()
        assert audio.shape == want_audio.shape
        assert np.abs(audio - want_audio).max() <= 1e-4, x.size
    batch, want = runtime.encode(items, 16000), codec.encode(items, 16000)
    assert np.array_equal(batch.tokens, want.tokens.numpy())
    assert len(np.unique(batch.tokens)) > 20  # the codes vary (random weights, filled)
    assert batch.lengths.tolist() == want.lengths.tolist()
    assert np.abs(runtime.decode(batch) - codec.decode(want).numpy()).max() <= 1e-4


def test_neucodec_graphs_say_both_rates(neucodec_onnx):
    manifest = json.loads((neucodec_onnx / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"features", "encoder", "decoder"}
    assert (manifest["sample_rate"], manifest["input_sample_rate"], manifest["samples_per_frame"],
            manifest["frame_rule"], manifest["audio_extra_frames"]) == \
        (24000, 16000, 480, "floor", 1)
    assert "Apache-2.0" in manifest["licence"]
    meta, dims = onnx_graph_facts(neucodec_onnx / "encoder.onnx")
    assert meta["codec"] == "neucodec" and meta["input_sample_rate"] == "16000"
    assert dims == [["batch", 1, "320*frames + 320"], ["batch", "frames", 160]]
    _, dims = onnx_graph_facts(neucodec_onnx / "decoder.onnx")
    assert dims == [["batch", 1, "frames"]]


def test_neucodec_runtime_equals_the_torch_codec(neucodec_folder, neucodec_onnx, tmp_path):
    codec, runtime = audiotok.load(neucodec_folder), audiotok.load(neucodec_onnx, threads=1)
    assert codec.name == "neucodec" and len(codec.model.semantic_encoder.encoder.layers) == 2
    assert (runtime.sample_rate, runtime.input_rate, runtime.num_frames(16319)) == \
        (24000, 16000, 50)
    assert runtime.info()["input_sample_rate"] == 16000
    check_runtime(runtime, codec, (320, 321, 639, 16123), seed=0)
    x = speech_like(24000, 9)  # 1 s at 24 kHz: resampled to 16 kHz, as the torch codec does
    assert np.array_equal(runtime.encode(x, 24000).tokens, codec.encode(x, 24000).tokens.numpy())
    with pytest.raises(AudioError, match=r"319 samples is less than one NeuCodec frame \(320 "
                                         r"samples at 16000 Hz\)"):
        runtime.encode(np.zeros(319, np.float32), 16000)
    # long inputs in the torch codec's windows (made short here: 60 frames, 10 each side)
    small_windows = tmp_path / "small_windows"
    small_windows.mkdir()
    for f in neucodec_onnx.glob("*.onnx*"):  # the graphs as they are, another manifest
        (small_windows / f.name).symlink_to(f)
    manifest = json.loads((neucodec_onnx / "audiotok_onnx.json").read_text())
    (small_windows / "audiotok_onnx.json").write_text(json.dumps(
        {**manifest, "window_frames": 60, "context_frames": 10}))
    windowed = audiotok.load(small_windows, threads=1)
    codec.streaming = replace(codec.streaming, long_window=Window(10, 60, 10))
    x = speech_like(64007, 5)  # 200 frames: four windows
    want = codec.encode(x, 16000)
    assert np.array_equal(windowed.encode(x, 16000).tokens, want.tokens.numpy())
    assert np.abs(windowed.decode(want) - codec.decode(want).numpy()).max() <= 1e-4


def test_distill_runtime_equals_the_torch_codec(distill_small, distill_onnx):
    manifest = json.loads((distill_onnx / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder"}
    assert (manifest["input_sample_rate"], manifest["frame_rule"], manifest["window_frames"]) \
        == (16000, "plus_one", None)
    codec, runtime = audiotok.load(distill_small[1]), audiotok.load(distill_onnx, threads=1)
    assert runtime.num_frames(319) == 1 and runtime.num_frames(320) == 2
    check_runtime(runtime, codec, (1, 319, 320, 16123, 16123, 7000), seed=20)
