"""ONNX graphs of the S3 tokenizer: features (audio [B, 1, N] of one length -> log-mel
[B, 128, N // 160], each item normalised by its own maximum; the STFT as real matrix products)
and encoder (log-mel [B, 128, F], F <= 3000 -> codes [B, 1, T]); with a token-to-audio model
also its graphs (token2wav/onnx.py), which the runtime decodes with. The manifest's
`feature_windows` tells the runtime how an input over 3000 mel frames runs: the features of the
whole input, then windows of them through the encoder, merged as the torch codec merges them."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ...export.onnx import MAX_FRAMES, Call, export_graph
from .config import HOP, WINDOW_FRAMES
from .mel import N_FFT, log_mel
from .model import S3Model


class Tokenizer(nn.Module):
    """The S3 model's encoder and quantizer alone (a token-to-audio part stays out of the
    graphs' capture)."""

    def __init__(self, model: S3Model):
        super().__init__()
        self.config, self.encoder, self.quantizer = model.config, model.encoder, model.quantizer

    forward = S3Model.forward


def onnx_graphs(codec, tmp: Path, facts: dict, settings) -> dict:
    model = Tokenizer(codec.model.eval())
    batch = torch.export.Dim("batch", min=1, max=4096)
    samples = torch.export.Dim("samples", min=N_FFT // 2 + 1, max=MAX_FRAMES * HOP)
    frames = torch.export.Dim("frames", min=2, max=WINDOW_FRAMES)
    audio = torch.randn(2, 1, 37 * HOP + 59) * 0.1
    mel = log_mel(audio)  # (the DFT form: export_onnx traces in graph_export())

    def encode(m, x):
        lengths = torch.full((x.shape[0],), x.shape[-1], device=x.device)
        return m(x, lengths)[0][:, None]

    graphs = {
        "features": export_graph(
            Call(model, lambda m, a: log_mel(a, m.config.n_mels)), (audio,),
            tmp / "features.onnx", ["audio"], ["features"], {"audio": {0: batch, 2: samples}},
            facts),
        "encoder": export_graph(
            Call(model, encode), (mel,), tmp / "encoder.onnx", ["features"], ["codes"],
            {"features": {0: batch, 2: frames}}, facts),
    }
    extra = {"graphs": graphs, "encode_graphs": ["features", "encoder"],
             "encode_input": "samples", "frame_axes": {"features": 2}}
    if codec.decoder is not None:  # token to audio: its graphs, the runtime's decode
        from .token2wav.onnx import exportable, token2wav_graphs

        if (why := exportable(codec.decoder)) is not None:
            extra["decode_refusal"] = why
        else:
            t2w = token2wav_graphs(codec.decoder.eval(), tmp, facts)
            extra.update(t2w, graphs={**graphs, **t2w["graphs"]})
    return extra
