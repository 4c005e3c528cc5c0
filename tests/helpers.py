"""Builders of checkpoint variants for tests (not part of the library)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch

from audiotok.models.s2.config import S2Config

_UNSET = object()


def s2_gguf_metadata(cfg: S2Config, frame_length: int = 2048) -> dict[str, tuple[str, object]]:
    """key -> (GGUF type, value), as s2.cpp's exporter writes them."""
    r = cfg.rvq_transformer
    k = "fish_speech.codec."
    ints = "ints"
    return {
        k + "sample_rate": ("u32", cfg.sample_rate),
        k + "hop_length": ("u32", cfg.hop_length),
        k + "frame_length": ("u32", frame_length),
        k + "encoder_dim": ("u32", cfg.encoder_dim),
        k + "decoder_dim": ("u32", cfg.decoder_dim),
        k + "latent_dim": ("u32", cfg.latent_dim),
        k + "encoder_rates": (ints, cfg.encoder_rates),
        k + "decoder_rates": (ints, cfg.decoder_rates),
        k + "encoder_transformer_layers": (ints, cfg.encoder_transformer_layers),
        k + "decoder_transformer_layers": (ints, (0,) * len(cfg.decoder_rates)),
        k + "quantizer_type": ("str", "downsample_residual_vector_quantize"),
        k + "quantizer_input_dim": ("u32", cfg.quantizer_input_dim),
        k + "quantizer_codebook_dim": ("u32", cfg.codebook_dim),
        k + "quantizer_residual_codebooks": ("u32", cfg.residual_codebooks),
        k + "quantizer_residual_codebook_size": ("u32", cfg.residual_codebook_size),
        k + "quantizer_semantic_codebook_size": ("u32", cfg.semantic_codebook_size),
        k + "quantizer_downsample_factor": (ints, cfg.quantizer_downsample_factor),
        k + "transformer.block_size": ("u32", 8192),
        k + "transformer.n_local_heads": ("i32", -1),
        k + "transformer.head_dim": ("u32", cfg.transformer_head_dim),
        k + "transformer.rope_freq_base": ("f32", cfg.rope_base),
        k + "transformer.layer_norm_rms_eps": ("f32", cfg.norm_eps),
        k + "rvq_transformer.window_size": ("u32", r.window_size),
        k + "rvq_transformer.block_size": ("u32", 2048),
        k + "rvq_transformer.n_layer": ("u32", r.n_layer),
        k + "rvq_transformer.n_head": ("u32", r.n_head),
        k + "rvq_transformer.n_local_heads": ("i32", r.n_local_heads),
        k + "rvq_transformer.head_dim": ("u32", r.head_dim),
        k + "rvq_transformer.dim": ("u32", r.dim),
        k + "rvq_transformer.feed_forward_length": ("u32", r.intermediate_size),
        k + "rvq_transformer.rope_freq_base": ("f32", r.rope_base),
        k + "rvq_transformer.layer_norm_rms_eps": ("f32", r.norm_eps),
    }


def write_gguf(path: Path, arch: str, metadata: dict, tensors: dict[str, torch.Tensor]) -> None:
    w = gguf.GGUFWriter(str(path), arch)
    for key, (kind, value) in metadata.items():
        if kind == "u32":
            w.add_uint32(key, value)
        elif kind == "i32":
            w.add_int32(key, value)
        elif kind == "f32":
            w.add_float32(key, value)
        elif kind == "str":
            w.add_string(key, value)
        elif kind == "ints":
            w.add_array(key, [int(v) for v in value])
    for name, t in tensors.items():
        w.add_tensor(name, t.detach().cpu().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


_WN = [(".weight_g", ".weight_v"),
       (".parametrizations.weight.original0", ".parametrizations.weight.original1")]


def respell_weight_norm(sd: dict[str, torch.Tensor], spelling: str) -> dict[str, torch.Tensor]:
    """A fish-speech layout dict with every weight-norm pair in one spelling ("legacy" or
    "parametrizations") and v rescaled per channel, so that ||v|| != g."""
    g_name, v_name = _WN[0 if spelling == "legacy" else 1]
    out = {}
    for key, t in sd.items():
        for g_suffix, v_suffix in _WN:
            if key.endswith(g_suffix):
                out[key[: -len(g_suffix)] + g_name] = t
                break
            if key.endswith(v_suffix):
                scale = torch.linspace(0.5, 2.0, t.shape[0]).view(-1, *[1] * (t.dim() - 1))
                out[key[: -len(v_suffix)] + v_name] = t * scale
                break
        else:
            out[key] = t
    return out


def random_like_s2(cfg: S2Config, seed: int = 0) -> dict[str, torch.Tensor]:
    """A random canonical state dict for `cfg` (for shape and format tests)."""
    from audiotok.models.s2.model import S2Model

    torch.manual_seed(seed)
    return {k: v.clone() for k, v in S2Model(cfg).state_dict().items()}


def np_f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)
