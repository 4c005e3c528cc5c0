"""A codec-only GGUF for s2.cpp: architecture `fish-speech-codec`, fish-speech's tensor names with
weight norm folded, `fish_speech.codec.*` metadata as s2.cpp's loader reads it (specs/s2_codec.md
section 6), from any S2 checkpoint audiotok loads."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ...errors import AudiotokError
from ...export.gguf import write_gguf
from . import FAMILY

ARCH = "fish-speech-codec"
KEY = "fish_speech.codec."
# what the reference modules say of themselves; s2.cpp reads them but nothing depends on them
ENCODER_BLOCK_SIZE = 8192
RVQ_BLOCK_SIZE = 2048
# s2.cpp pads encoder input to frame_length; 2048 (one code frame) is what fish-speech pads to,
# so s2.cpp's tokens equal fish-speech's (its own exporter writes 512)
FRAME_LENGTH = 2048
GGUF_DTYPES = {"f32": np.float32, "f16": np.float16}


def gguf_metadata(cfg, frame_length: int = FRAME_LENGTH) -> dict[str, tuple[str, object]]:
    """key -> (GGUF type, value) for an S2Config: "u32", "i32", "f32", "str" or "ints"."""
    r = cfg.rvq_transformer
    k = KEY
    return {
        k + "sample_rate": ("u32", cfg.sample_rate),
        k + "hop_length": ("u32", cfg.hop_length),
        k + "frame_length": ("u32", frame_length),
        k + "encoder_dim": ("u32", cfg.encoder_dim),
        k + "decoder_dim": ("u32", cfg.decoder_dim),
        k + "latent_dim": ("u32", cfg.latent_dim),
        k + "encoder_rates": ("ints", cfg.encoder_rates),
        k + "decoder_rates": ("ints", cfg.decoder_rates),
        k + "encoder_transformer_layers": ("ints", cfg.encoder_transformer_layers),
        # fish-speech builds a decoder transformer but never runs it (no weights): none here
        k + "decoder_transformer_layers": ("ints", (0,) * len(cfg.decoder_rates)),
        k + "quantizer_type": ("str", "downsample_residual_vector_quantize"),
        k + "quantizer_input_dim": ("u32", cfg.quantizer_input_dim),
        k + "quantizer_codebook_dim": ("u32", cfg.codebook_dim),
        k + "quantizer_residual_codebooks": ("u32", cfg.residual_codebooks),
        k + "quantizer_residual_codebook_size": ("u32", cfg.residual_codebook_size),
        k + "quantizer_semantic_codebook_size": ("u32", cfg.semantic_codebook_size),
        k + "quantizer_downsample_factor": ("ints", cfg.quantizer_downsample_factor),
        k + "transformer.block_size": ("u32", ENCODER_BLOCK_SIZE),
        k + "transformer.n_local_heads": ("i32", -1),
        k + "transformer.head_dim": ("u32", cfg.transformer_head_dim),
        k + "transformer.rope_freq_base": ("f32", cfg.rope_base),
        k + "transformer.layer_norm_rms_eps": ("f32", cfg.norm_eps),
        k + "rvq_transformer.window_size": ("u32", r.window_size),
        k + "rvq_transformer.block_size": ("u32", RVQ_BLOCK_SIZE),
        k + "rvq_transformer.n_layer": ("u32", r.n_layer),
        k + "rvq_transformer.n_head": ("u32", r.n_head),
        k + "rvq_transformer.n_local_heads": ("i32", r.n_local_heads),
        k + "rvq_transformer.head_dim": ("u32", r.head_dim),
        k + "rvq_transformer.dim": ("u32", r.dim),
        k + "rvq_transformer.feed_forward_length": ("u32", r.intermediate_size),
        k + "rvq_transformer.rope_freq_base": ("f32", r.rope_base),
        k + "rvq_transformer.layer_norm_rms_eps": ("f32", r.norm_eps),
    }


def rope_table(rows: int, head_dim: int, base: float) -> torch.Tensor:
    """The reference's `freqs_cis` buffer: [rows, head_dim/2, (cos, sin)], rounded to bfloat16
    as the reference stores it. Neither s2.cpp nor audiotok reads it; s2.cpp's exporter keeps it,
    so a file from audiotok has the same tensors."""
    freqs = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(rows, dtype=torch.float32), freqs)
    return torch.stack([angles.cos(), angles.sin()], -1).to(torch.bfloat16).float()


def codec_tensors(codec) -> dict[str, torch.Tensor]:
    """The codec's tensors under fish-speech's names (weight norm folded), plus the three
    `freqs_cis` tables."""
    cfg = codec.config
    sd = {k: v.detach().float().cpu() for k, v in codec.model.state_dict().items()}
    enc = [i for i, n in enumerate(cfg.encoder_transformer_layers) if n > 0]
    for i in enc:
        sd[f"encoder.block.{i + 1}.block.5.freqs_cis"] = rope_table(
            ENCODER_BLOCK_SIZE, cfg.transformer_head_dim, cfg.rope_base)
    r = cfg.rvq_transformer
    for name in ("pre_module", "post_module"):
        sd[f"quantizer.{name}.freqs_cis"] = rope_table(RVQ_BLOCK_SIZE, r.head_dim, r.rope_base)
    return dict(sorted(sd.items()))


def export_gguf(codec, out: str | os.PathLike, dtype: str = "f16") -> Path:
    """Write `codec` (an S2 Codec) as a standalone s2.cpp codec GGUF at `out`. dtype "f16" (what
    s2.cpp's CPU backend needs for its conv kernels; every tensor F16 as s2.cpp's exporter writes)
    or "f32". The file appears whole or not at all."""
    if getattr(codec, "name", None) != FAMILY.name:
        raise AudiotokError("GGUF export is for the S2 codec (s2.cpp's format); "
                            f"got {getattr(codec, 'title', type(codec).__name__)}")
    if dtype not in GGUF_DTYPES:
        raise AudiotokError(f"unknown GGUF dtype {dtype!r}; expected f16 or f32")
    np_dtype = GGUF_DTYPES[dtype]
    tensors = {name: t.numpy().astype(np_dtype) for name, t in codec_tensors(codec).items()}
    return write_gguf(out, ARCH, gguf_metadata(codec.config), tensors)
