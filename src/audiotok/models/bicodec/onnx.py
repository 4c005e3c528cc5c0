"""BiCodec's ONNX graphs: encoder (wav2vec2's normalised input [B, 1, N], any N >= 400 ->
semantic codes [B, 1, (N - 400) // 320 + 1]; items of one length as a batch), speaker (reference
clips [B, 96000] -> global tokens [B, 32]; the mel spectrogram as real DFT products) and
decoder (codes [B, 1, T] and global tokens [B, 32] -> audio [B, 1, 320 T]). The numpy front
end (volume, reference clip, normalisation: frontend.encode_inputs) is named in the manifest
with its settings, and the runtime runs it before the graphs."""

from __future__ import annotations

from pathlib import Path

import torch

from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    spf = codec.samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    samples = torch.export.Dim("samples", min=400, max=MAX_FRAMES * spf)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    audio = torch.randn(2, 1, 9 * spf + 437)
    clip = torch.randn(2, model.config.ref_samples) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, 1, 7))
    utterance = torch.randint(0, codec.global_codebook_size, (2, codec.global_tokens))
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.semantic_tokens(a[:, 0])[:, None]), (audio,),
            tmp / "encoder.onnx", ["audio"], ["codes"], {"audio": {0: batch, 2: samples}},
            facts),
        "speaker": export_graph(
            Call(model, lambda m, c: m.global_tokens(c)), (clip,), tmp / "speaker.onnx",
            ["ref_clip"], ["globals"], {"ref_clip": {0: batch}}, facts),
        "decoder": export_graph(
            Call(model, lambda m, c, g: m.decode(c[:, 0], g)), (codes, utterance),
            tmp / "decoder.onnx", ["codes", "globals"], ["audio"],
            {"codes": {0: batch, 2: frames}, "globals": {0: batch}}, facts),
    }
    return {"graphs": graphs, "encode_input": "samples", "utterance_graph": "speaker",
            "frontend": ".frontend:encode_inputs", "frontend_settings": codec.frontend_settings()}
