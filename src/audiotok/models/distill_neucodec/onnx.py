"""DistillNeuCodec's ONNX graphs: encoder (audio [B, 1, 320 T], padded as the torch codec pads
it, -> codes [B, 1, T]; DistilHuBERT and the local-attention acoustic encoder run on the whole
item, so the runtime runs items of one padded length as a batch and does not window) and
NeuCodec's decoder graph."""

from __future__ import annotations

from pathlib import Path

import torch

from ...export.onnx import MAX_FRAMES, Call, export_graph
from ..xcodec2.onnx import decoder_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    hop = codec.input_samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    # long enough that no attention window (the acoustic encoder's, the decoder's) specialises
    example = 2 * max(model.config.acoustic_window, 64) + 37
    audio = torch.randn(2, 1, example * hop) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, 1, example))
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.encode(a)[:, None]), (audio,), tmp / "encoder.onnx",
            ["audio"], ["codes"], {"audio": {0: batch, 2: hop * frames}}, facts),
        "decoder": decoder_graph(model, codes, tmp, facts, batch, frames),
    }
    return {"graphs": graphs}
