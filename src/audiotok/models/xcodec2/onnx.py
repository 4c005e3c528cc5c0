"""ONNX graphs of X-Codec2 and NeuCodec: features (audio -> the semantic branch's log-mel input
[B, T, 160], the real DFT as float64 matrix products), encoder (audio and its features -> codes
[B, 1, T]) and decoder (codes -> audio [B, 1, hop T] at the output rate, the iSTFT as real
matrix products and a shifted-sum overlap-add). No complex tensors, no data-dependent asserts.

The encode graphs take audio of T + e whole input frames (320 samples): e = 0 for X-Codec2,
e = 1 for NeuCodec, whose features are framed without centre padding (the manifest's
`audio_extra_frames`). The runtime windows long inputs as the torch codec does: the features of
a window are a slice of the whole signal's, its audio its frames and e more."""

from __future__ import annotations

from pathlib import Path

import torch

from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    hop, extra = codec.input_samples_per_frame, codec.audio_extra_frames
    batch = torch.export.Dim("batch", min=1, max=4096)
    frames = torch.export.Dim("frames", min=2, max=MAX_FRAMES)
    samples = hop * frames + hop * extra
    example = 2 * max(model.config.semantic.left_max_position_embeddings,
                      model.config.semantic.right_max_position_embeddings) + 37
    audio = torch.randn(2, 1, (example + extra) * hop) * 0.1
    features, _ = model.features(audio)
    codes = torch.randint(0, codec.codebook_sizes[0], (2, 1, example))
    graphs = {
        "features": export_graph(
            Call(model, lambda m, a: m.features(a)[0]), (audio,), tmp / "features.onnx",
            ["audio"], ["features"], {"audio": {0: batch, 2: samples}}, facts),
        "encoder": export_graph(
            Call(model, lambda m, a, f: m.encode(a, features=f)[:, None]), (audio, features),
            tmp / "encoder.onnx", ["audio", "features"], ["codes"],
            {"audio": {0: batch, 2: samples}, "features": {0: batch, 1: frames}}, facts),
        "decoder": decoder_graph(model, codes, tmp, facts, batch, frames),
    }
    # the features run first, on the whole signal; a window takes its frames (axis 1)
    return {"graphs": graphs, "encode_graphs": ["features", "encoder"],
            "frame_axes": {"features": 1}, "audio_extra_frames": extra}


def decoder_graph(model, codes: torch.Tensor, tmp: Path, facts: dict, batch, frames) -> str:
    """decoder.onnx: codes [B, 1, T] -> audio [B, 1, hop T] (model.decode; this family's decoder,
    which DistillNeuCodec shares)."""
    return export_graph(Call(model, lambda m, c: m.decode(c[:, 0])), (codes,),
                        tmp / "decoder.onnx", ["codes"], ["audio"],
                        {"codes": {0: batch, 2: frames}}, facts)
