"""WavTokenizer's ONNX graphs: encoder (audio [B, 1, N], any N: the reflection that completes
the last frame is in the graph, so the manifest's `encode_input: "samples"` tells the runtime to
feed each item's samples as they are, items of one length as a batch -> codes [B, 1,
ceil(N / hop)]; the LSTM as ONNX LSTM nodes) and decoder (codes [B, 1, T] -> audio
[B, 1, T * hop]; items of one length as a batch, as the torch codec decodes them)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    spf = codec.samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    samples = torch.export.Dim("samples", min=2, max=MAX_FRAMES * spf)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    audio = torch.randn(2, 1, 9 * spf + 37) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, 1, 7))
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.encode(a)), (audio,), tmp / "encoder.onnx", ["audio"],
            ["codes"], {"audio": {0: batch, 2: samples}}, facts),
        "decoder": export_graph(
            Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts),
    }
    return {"graphs": graphs, "encode_input": "samples"}
