"""The Qwen3-TTS tokenizer's ONNX export. Full attention: the encoder graph takes any number of
samples, padding a last partial frame per convolution as the torch codec does, so the runtime's
codes equal the torch codec's for ragged lengths, 12 s (past the 250-step window) and a batch of
mixed lengths; with --step-graphs-only, the decoder's step graph, for a whole input and in
pushes of 1-11 frames, within SAME_MODEL of the torch decode; no encoder step graph, and the runtime
says why. Window attention: the encoder step graph takes any number of samples too, so streams
pushed in ragged pieces, and whole inputs run through it, give the torch codec's codes."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from tests.bounds import SAME_MODEL
from tests.helpers import export_onnx_cli  # noqa: E402


def test_runtime_equals_the_torch_codec(qwen_small, tmp_path):
    import audiotok
    from audiotok.errors import AudiotokError
    from audiotok.runtime import OnnxCodec

    model = qwen_small[1]["model"]
    out = tmp_path / "onnx"
    export_onnx_cli(model, out, "--step-graphs-only")
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder", "decoder_step"}
    assert (manifest["encode_input"], manifest["attention"], manifest["max_push_frames"]) == \
        ("samples", "full", 72)
    codec, onnx = audiotok.load(model), OnnxCodec(out, threads=1)
    rng = np.random.default_rng(11)
    items = [(0.2 * rng.standard_normal(n)).astype(np.float32)
             for n in (1, 1919, 1921, 24001, 12 * 24000 + 5)]
    for x in items:
        assert np.array_equal(onnx.encode(x, 24000).tokens,
                              codec.encode(torch.from_numpy(x), 24000).tokens.numpy()), x.size
    batch = items + items[1:2]
    assert np.array_equal(onnx.encode(batch, 24000).tokens,
                          codec.encode([torch.from_numpy(x) for x in batch], 24000).tokens.numpy())
    codes = rng.integers(0, 2048, (1, 16, 90))
    want = codec.decode(torch.from_numpy(codes)).numpy()
    assert np.abs(onnx.decode(codes) - want).max() <= SAME_MODEL
    pushes, out, at = rng.integers(1, 12, 40), [], 0
    with onnx.stream_decoder() as dec:
        for n in pushes:
            out.append(dec.push(codes[..., at : at + n]))
            at += int(n)
            if at >= 90:
                break
        out.append(dec.flush())
    streamed = np.concatenate(out, -1)
    assert streamed.shape == want.shape and np.abs(streamed - want).max() <= SAME_MODEL
    with pytest.raises(AudiotokError, match=r"no encoder_step graph.*attention=window"):
        onnx.stream_encoder()


def test_the_window_attention_encoder_streams_through_its_step_graph(qwen_small, tmp_path):
    import audiotok
    from audiotok.runtime import OnnxCodec

    model = f"{qwen_small[1]['model']}?attention=window"
    out = tmp_path / "onnx"
    export_onnx_cli(model, out, "--step-graphs-only")
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"encoder_step", "decoder_step"}
    assert (manifest["encode_input"], manifest["attention"]) == ("samples", "window")
    codec, onnx = audiotok.load(model), OnnxCodec(out, threads=1)
    rng = np.random.default_rng(12)
    items = [(0.2 * rng.standard_normal(n)).astype(np.float32)
             for n in (1, 1919, 1920, 1921, 5 * 1920 + 77, 12 * 24000 + 5)]
    wants = [codec.encode(torch.from_numpy(x), 24000).tokens.numpy() for x in items]
    for x, want in zip(items, wants, strict=True):  # whole inputs: pushed, then flushed
        assert np.array_equal(onnx.encode(x, 24000).tokens, want), x.size
    assert np.array_equal(onnx.encode(items[2:4] + items[2:3], 24000).tokens,
                          codec.encode([torch.from_numpy(x) for x in items[2:4] + items[2:3]],
                                       24000).tokens.numpy())
    x, want = np.stack([items[-1], items[-1][::-1]]), np.concatenate(
        [wants[-1], codec.encode(torch.from_numpy(items[-1][::-1].copy()),
                                 24000).tokens.numpy()])
    got, at = [], 0
    with onnx.stream_encoder(2) as enc:
        while at < x.shape[-1]:  # 1 sample to 4.7 frames a push
            n = int(rng.integers(1, 9000))
            got.append(enc.push(x[:, at : at + n]))
            at += n
        got.append(enc.flush())
    assert np.array_equal(np.concatenate(got, -1), want)
