"""The X-Codec family's ONNX graphs: encoder (audio [B, 1, N], any N: the resampling, HuBERT
and the pad path, whose padding is arithmetic on N, are in the graph; the manifest's
`encode_input: "samples"` tells the runtime to feed each item's samples as they are, items of
one length as a batch -> codes [B, K, T]) and decoder (codes [B, K, T] -> audio [B, 1,
T x hop]). The encoder graph holds the codec's `padding` (Boson's or transformers')."""

from __future__ import annotations

from pathlib import Path

import torch

from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    spf, pad = codec.samples_per_frame, codec.pad
    batch = torch.export.Dim("batch", min=1, max=4096)
    samples = torch.export.Dim("samples", min=codec.min_samples, max=MAX_FRAMES * spf)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    audio = torch.randn(2, 1, 9 * spf + 500) * 0.1  # (a length on the pad path)
    codes = torch.randint(0, codec.codebook_sizes[0], (2, codec.num_codebooks, 7))
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.encode(a, pad)), (audio,), tmp / "encoder.onnx",
            ["audio"], ["codes"], {"audio": {0: batch, 2: samples}},
            {**facts, "padding": codec.padding}),
        "decoder": export_graph(
            Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts),
    }
    return {"graphs": graphs, "encode_input": "samples"}
