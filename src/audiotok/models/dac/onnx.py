"""DAC's ONNX graphs: encoder (audio [B, 1, N], N whole frames -> codes [B, K, T], K the
codebooks the codec was loaded with) and decoder (codes [B, K, T] -> audio
[B, 1, config.decoded_samples(T)]: T x 320 - 8 samples at 24 and 16 kHz, which the manifest's
`decode_trim` tells the runtime). Exported with the default frame padding only: the "layer"
convention's encoder takes raw lengths that the runtime's frame arithmetic does not model."""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import AudiotokError
from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    if codec.padding != "frame":
        raise AudiotokError("DAC exports with padding='frame' (the default); the graphs take "
                            "whole frames")
    if codec.pipeline != "plain":
        raise AudiotokError("DAC exports its model alone: load it without pipeline='outetts' "
                            "(the runtime does not normalise loudness)")
    model = codec.model.eval()
    spf = codec.samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    audio = torch.randn(2, 1, 5 * spf) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, codec.num_codebooks, 7))
    trim = 7 * spf - model.config.decoded_samples(7)
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.encode(a)), (audio,), tmp / "encoder.onnx", ["audio"],
            ["codes"], {"audio": {0: batch, 2: spf * frames}}, facts),
        "decoder": export_graph(
            Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts),
    }
    return {"graphs": graphs, "decode_trim": trim}
