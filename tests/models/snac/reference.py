"""The SNAC reference for parity tests: the `snac` package's SNAC (PyPI snac 1.2.1) with random
weights, saved as a hub repository is laid out (config.json + pytorch_model.bin).

Default init leaves every Snake alpha at 1, every bias at 0 and each weight-norm gain equal to
its direction's norm; they are randomised so that no path is trivial (the codebooks are N(0, 1),
which uses them all)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

# the spec's small configurations (odd stride 3; with local attention) and the released ones
TINY = {"sampling_rate": 16000, "encoder_dim": 16, "encoder_rates": [2, 3], "decoder_dim": 32,
        "decoder_rates": [3, 2], "attn_window_size": None, "codebook_size": 64,
        "codebook_dim": 4, "vq_strides": [4, 2, 1], "noise": True, "depthwise": True}
TINY_ATTN = {**TINY, "attn_window_size": 4, "decoder_dim": 64}
TINY_BLOCKS = {**TINY_ATTN, "attn_window_size": 8}  # windows of 2 coarse frames, as 32 kHz's 4
TINY_ORPHEUS = {**TINY, "codebook_size": 4096}  # 7 rows of 4096 codes: Orpheus's ids apply
FULL_24 = {"sampling_rate": 24000, "encoder_dim": 48, "encoder_rates": [2, 4, 8, 8],
           "decoder_dim": 1024, "decoder_rates": [8, 8, 4, 2], "attn_window_size": None,
           "codebook_size": 4096, "codebook_dim": 8, "vq_strides": [4, 2, 1], "noise": True,
           "depthwise": True}
FULL_32 = {**FULL_24, "sampling_rate": 32000, "encoder_dim": 64, "encoder_rates": [2, 3, 8, 8],
           "decoder_dim": 1536, "decoder_rates": [8, 8, 3, 2], "attn_window_size": 32,
           "vq_strides": [8, 4, 2, 1]}
FULL_44 = {**FULL_32, "sampling_rate": 44100}  # snac_44khz: the 32 kHz network at 44.1 kHz


def snac_model(config: dict, seed: int = 0):
    import snac

    torch.manual_seed(seed)
    model = snac.SNAC(**config).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.005 * torch.randn(p.shape, generator=g))  # larger: one DC code
            elif name.endswith("original0"):
                p.mul_(0.7 + 0.6 * torch.rand(p.shape, generator=g))
    return model


def save(model, config: dict, folder: Path, legacy: bool = False) -> Path:
    """The hub layout; `legacy`: weight norm spelled weight_g / weight_v."""
    folder.mkdir(parents=True, exist_ok=True)
    sd = model.state_dict()
    if legacy:
        sd = {k.replace(".parametrizations.weight.original0", ".weight_g")
              .replace(".parametrizations.weight.original1", ".weight_v"): v
              for k, v in sd.items()}
    torch.save(sd, folder / "pytorch_model.bin")
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def noise_off(model) -> None:
    """Zero every noise block's gain: the reference's output without its noise term."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".linear.parametrizations.weight.original0" in name:
                p.zero_()
