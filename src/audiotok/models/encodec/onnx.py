"""EnCodec's ONNX graphs: encoder (audio [B, 1, N], any N: the reflection that completes the
last frame is in the graph, so the manifest's `encode_input: "samples"` tells the runtime to feed
each item's samples as they are, items of one length as a batch -> codes [B, K, ceil(N / hop)],
K the codebooks the codec was loaded with) and decoder (codes [B, K, T] -> audio
[B, 1, T * hop]). The LSTMs are ONNX LSTM nodes (model.py's _onnx_lstm)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import AudiotokError
from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, max_push_frames: int | None) -> dict:
    if max_push_frames is not None:
        raise AudiotokError("max_push_frames applies to causal codecs")
    if codec.segmented:
        raise AudiotokError("the 48 kHz EnCodec (stereo segments with their scales) has no "
                            "ONNX export yet; the 24 and 32 kHz models have")
    model = codec.model.eval()
    spf = codec.samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    samples = torch.export.Dim("samples", min=2, max=MAX_FRAMES * spf)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    audio = torch.randn(2, 1, 9 * spf + 37) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, codec.num_codebooks, 7))
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.encode(a)), (audio,), tmp / "encoder.onnx", ["audio"],
            ["codes"], {"audio": {0: batch, 2: samples}}, facts),
        "decoder": export_graph(
            Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts),
    }
    return {"graphs": graphs, "encode_input": "samples"}
