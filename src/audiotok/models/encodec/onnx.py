"""EnCodec's ONNX graphs: encoder (audio [B, 1, N], any N: the reflection that completes the
last frame is in the graph, so the manifest's `encode_input: "samples"` tells the runtime to feed
each item's samples as they are, items of one length as a batch -> codes [B, K, ceil(N / hop)],
K the codebooks the codec was loaded with) and decoder (codes [B, K, T] -> audio
[B, 1, T * hop]). The LSTMs are ONNX LSTM nodes (nn/seanet.py's _onnx_lstm). The 48 kHz model's
graphs take one segment (segments.py): the encoder's audio [B, 2, n <= 48000] -> codes and
the segment's scales [B] (the normalisation in the graph), the decoder's codes -> unscaled
audio [B, 2, 320 t]; the manifest's frame rule ("segments:48000:47520") and `channels` tell
the runtime to cut, scale and overlap-add (runtime/segments.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...export.onnx import MAX_FRAMES, Call, export_graph
from . import segments


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    spf, channels = codec.samples_per_frame, codec.channels
    batch = torch.export.Dim("batch", min=1, max=4096)
    samples = torch.export.Dim("samples", min=2, max=MAX_FRAMES * spf)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    audio = torch.randn(2, channels, 9 * spf + 37) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, codec.num_codebooks, 7))
    encode, outputs = (lambda m, a: m.encode(a)), ["codes"]
    if codec.segmented:  # one segment a call, scaled to unit loudness in the graph
        encode, outputs = (lambda m, a: segments.encode_segment(m, a)), ["codes", "scales"]
    graphs = {
        "encoder": export_graph(
            Call(model, encode), (audio,), tmp / "encoder.onnx", ["audio"], outputs,
            {"audio": {0: batch, 2: samples}}, facts),
        "decoder": export_graph(
            Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts),
    }
    return {"graphs": graphs, "encode_input": "samples", "channels": channels}
