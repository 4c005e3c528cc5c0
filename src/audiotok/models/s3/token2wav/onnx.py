"""ONNX graphs of S3 token to audio (offline decode; the parts TensorRT users build engines
from), which the torch-free runtime runs with runtime.py's Euler steps:

- flow_encoder: prompt and tokens [B, L] (int64, right-padded), lengths [B], x-vectors
  [B, 192] -> mu [B, 80, 2L] and the speaker's channels [B, 80];
- estimator: one velocity evaluation, x, mu, cond [R, 80, T], mask [R, 1, T], t [R],
  speaker [R, 80] -> [R, 80, T] (R: the guided pair's rows);
- vocoder: mel [B, 80, M] and the excitation's noise -> audio [B, 1, 480 M] (the spectra as
  real DFT products).

CosyVoice 2's fixed flow noise (300 s of mel) goes beside them as flow_noise.npy. CosyVoice
2's weights only (`exportable`): Chatterbox's draw their flow noise per call, excite with
SineGen and fade in, which the runtime does not do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ....export.onnx import export_graph
from .config import N_MELS, SPEAKER_DIM, TOKEN_MEL_RATIO
from .hift import HiftNoise
from .model import FIXED_FRAMES


class FlowEncoder(nn.Module):
    def __init__(self, flow):
        super().__init__()
        self.flow = flow

    def forward(self, tokens, lengths, embedding):
        return self.flow.encode(tokens, lengths, embedding)


class EstimatorCall(nn.Module):
    def __init__(self, estimator):
        super().__init__()
        self.estimator = estimator

    def forward(self, x, mask, mu, t, spks, cond):
        return self.estimator(x, mask, mu, t, spks, cond)


class Vocoder(nn.Module):
    """mel [B, 80, M] and the excitation's noise [B, 480 M, 9] -> audio [B, 1, 480 M]
    (SineGen2: the phase draws do not change the audio)."""

    def __init__(self, hift):
        super().__init__()
        self.hift = hift

    def forward(self, mel, noise):
        return self.hift(mel, HiftNoise(noise.new_zeros(noise.shape[0], noise.shape[-1]), noise))


def token2wav_graphs(model, tmp: Path, facts: dict) -> dict:
    """The graphs above and the manifest's entries for the runtime (model: Token2Wav)."""
    cfg, hcfg = model.config, model.hift.config
    batch = torch.export.Dim("batch", min=1, max=1024)
    rows = torch.export.Dim("rows", min=1, max=2048)
    length = torch.export.Dim("tokens", min=2, max=7500)
    frames = torch.export.Dim("frames", min=4, max=15000)
    mel = torch.export.Dim("mel", min=2, max=15000)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 6561, (2, 37), generator=g)
    lengths = torch.tensor([37, 30])
    embedding = torch.randn(2, SPEAKER_DIM, generator=g)
    x = torch.randn(4, N_MELS, 74, generator=g)
    mask = torch.ones(4, 1, 74)
    t = torch.rand(4, generator=g)
    spks = torch.randn(4, N_MELS, generator=g)
    m = torch.randn(2, N_MELS, 23, generator=g)
    draws = HiftNoise.draw(hcfg, 2, 23, g)
    samples = hcfg.upsample * mel
    graphs = {
        "flow_encoder": export_graph(
            FlowEncoder(model.flow), (tokens, lengths, embedding), tmp / "flow_encoder.onnx",
            ["tokens", "lengths", "embedding"], ["mu", "speaker"],
            {"tokens": {0: batch, 1: length}, "lengths": {0: batch},
             "embedding": {0: batch}}, facts),
        "estimator": export_graph(
            EstimatorCall(model.flow.decoder.estimator),
            (x, mask, torch.randn_like(x), t, spks, torch.randn_like(x)),  # (distinct tensors:
            # an input passed twice is traced as one)
            tmp / "estimator.onnx", ["x", "mask", "mu", "t", "speaker", "cond"], ["velocity"],
            {"x": {0: rows, 2: frames}, "mask": {0: rows, 2: frames},
             "mu": {0: rows, 2: frames}, "t": {0: rows}, "speaker": {0: rows},
             "cond": {0: rows, 2: frames}}, facts),
    }
    graphs["vocoder"] = export_graph(
        Vocoder(model.hift), (m, draws.noise), tmp / "vocoder.onnx", ["mel", "noise"],
        ["audio"], {"mel": {0: batch, 2: mel}, "noise": {0: batch, 1: samples}}, facts)
    settings = {"steps": cfg.flow.steps, "cfg_rate": cfg.flow.cfg_rate,
                "token_mel_ratio": TOKEN_MEL_RATIO, "upsample": hcfg.upsample,
                "harmonics": hcfg.harmonics + 1, "flow_noise": "flow_noise.npy"}
    np.save(tmp / "flow_noise.npy", model.noise(FIXED_FRAMES, None)[0].numpy())
    return {"graphs": graphs, "token2wav": settings,
            "decoder_runtime": ".token2wav.runtime:decode"}


def exportable(model) -> str | None:
    """Why these token-to-audio weights are not exported (None: they are): the graphs and the
    runtime hold CosyVoice 2's conventions (its fixed flow noise, SineGen2, no fade-in)."""
    if model.config.noise != "fixed" or model.hift.config.sine != "sinegen2" or \
            model.config.fade_in:
        return ("this ONNX export holds the S3 tokenizer only: the token-to-audio graphs are "
                "exported for CosyVoice 2's weights (fixed flow noise, SineGen2), not these "
                "(Chatterbox's); decode with the torch codec")
    return None
