"""SNAC's ONNX graphs: encoder (audio [B, 1, N], N whole frames as the frame rule pads them ->
codes [B, K, T]) and decoder (codes -> audio [B, 1, T * frame]). The decoder's noise is the
codec's setting at export: "seeded" is computed in the graph from the seed and each step's
position (integer hashing, Box-Muller), so the graph's audio is the torch codec's; "torch" (a
global generator) cannot be exported. At 32/44 kHz the decoder graph pads a frame count that
is not whole attention windows with copies of the last frame, as the torch codec does."""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import AudiotokError
from ...export.onnx import MAX_FRAMES, Call, export_graph


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = codec.model.eval()
    if model.noise == "torch":
        raise AudiotokError("the decoder's torch noise (a global generator) cannot be exported; "
                            "load the codec with noise='seeded' (the default) or 'off'")
    spf, align = codec.samples_per_frame, codec.streaming.window.align
    batch = torch.export.Dim("batch", min=1, max=4096)
    blocks = torch.export.Dim("blocks", min=1, max=MAX_FRAMES // align)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    example = 3 * align + (1 if align > 1 else 4)
    audio = torch.randn(2, 1, 3 * align * spf) * 0.1
    codes = torch.randint(0, codec.codebook_sizes[0], (2, codec.num_codebooks, example))
    facts.update(noise=model.noise, seed=model.seed)
    graphs = {
        "encoder": export_graph(
            Call(model, lambda m, a: m.encode(a)), (audio,), tmp / "encoder.onnx", ["audio"],
            ["codes"], {"audio": {0: batch, 2: align * spf * blocks}}, facts),
        "decoder": export_graph(
            Call(model, lambda m, c: _decode_edge_padded(m, c, align)), (codes,),
            tmp / "decoder.onnx", ["codes"], ["audio"], {"codes": {0: batch, 2: frames}},
            facts),
    }
    return {"graphs": graphs, "noise": model.noise, "seed": model.seed}


def _decode_edge_padded(model, codes: torch.Tensor, align: int) -> torch.Tensor:
    """model.decode of codes padded to whole attention windows with their last frame, trimmed
    back (SnacCodec._decode_at's rule, in the graph)."""
    if align == 1:
        return model.decode(codes)
    t = codes.shape[-1]
    padded = torch.cat([codes, codes[..., -1:].expand(-1, -1, align - 1)], -1)
    whole = (t + align - 1) // align * align
    audio = model.decode(padded[..., :whole])
    return audio[..., : t * model.config.samples_per_frame]
