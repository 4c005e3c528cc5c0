"""The Mimi references for parity tests: moshi's MimiModel (PyPI moshi, installed --no-deps) and
transformers' MimiModel, with the same random weights, saved in both checkpoint layouts.

Random weights follow the spec's recipe (specs/mimi.md section 7): default init leaves every
codebook empty (all codes 0) and layer scales at 0.01 (transformers almost the identity), so the
scales are raised and the codebooks filled at the scale of the projected latent.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

os.environ.setdefault("NO_TORCH_COMPILE", "1")

# the small config of the spec's recipe (context 8: the attention window is reached in 4 frames)
SMALL_MOSHI = {"seanet": {"dimension": 64, "n_filters": 8},
               "quantizer": {"dimension": 16, "n_q": 4, "bins": 64, "input_dimension": 64,
                             "output_dimension": 64},
               "transformer": {"d_model": 64, "num_heads": 4, "num_layers": 2,
                               "dim_feedforward": 128, "input_dimension": 64,
                               "output_dimensions": [64], "context": 8}}
SMALL_HF = {"hidden_size": 64, "num_filters": 8, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
            "intermediate_size": 128, "sliding_window": 8, "codebook_size": 64,
            "codebook_dim": 16, "vector_quantization_hidden_dimension": 16, "num_quantizers": 4,
            "upsample_groups": 64}


def moshi_model(small: bool, seed: int = 0):
    """moshi's MimiModel with randomised weights (all codebooks in use)."""
    from moshi.models import loaders

    config = copy.deepcopy(loaders._mimi_config)
    if small:
        for part, values in SMALL_MOSHI.items():
            config[part] = {**config[part], **values}
    n_q = config["quantizer"]["n_q"]
    torch.manual_seed(seed)
    model = loaders.get_mimi(None, mimi_config=config, device="cpu", num_codebooks=n_q).eval()
    randomise(model, seed)
    return model


@torch.no_grad()
def randomise(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 1)
    for name, p in model.named_parameters():
        if "layer_scale" in name:
            p.copy_(0.3 + 0.2 * torch.rand(p.shape, generator=g))
    probe = torch.randn(1, 1, 1920 * 4, generator=g) * 0.1
    latent = model._encode_to_unquantized_latent(probe)
    for rvq in (model.quantizer.rvq_first, model.quantizer.rvq_rest):
        scale = rvq.input_proj(latent).std().item()
        for layer in rvq.vq.layers:
            cb = layer._codebook
            usage = 0.5 + torch.rand(cb.cluster_usage.shape, generator=g)
            cb.cluster_usage.copy_(usage)
            cb.embedding_sum.copy_(torch.randn(cb.embedding_sum.shape, generator=g) * scale
                                   * usage[:, None])
            cb._embedding = None
            cb._initialized.fill_(1.0)


def moshi_state(model) -> dict[str, torch.Tensor]:
    """The state dict as the released moshi file spells it (fused `in_proj_weight`)."""
    out = {}
    for k, v in model.state_dict().items():
        k = k.replace(".self_attn.in_projs.0.weight", ".self_attn.in_proj_weight")
        k = k.replace(".self_attn.out_projs.0.weight", ".self_attn.out_proj.weight")
        out[k] = v.contiguous()
    return out


def hf_state(model, num_heads: int) -> dict[str, torch.Tensor]:
    """moshi's state dict in transformers' flat checkpoint names, q/k rows permuted for
    rotate-half RoPE (as transformers' conversion script does)."""
    out = {}
    for k, v in model.state_dict().items():
        if "_embedding" in k:
            continue
        k = k.replace("encoder.model.", "encoder.layers.").replace("decoder.model.",
                                                                    "decoder.layers.")
        k = k.replace(".conv.conv.conv.", ".conv.").replace(".convtr.convtr.convtr.", ".conv.")
        k = k.replace(".conv.conv.", ".conv.").replace(".convtr.convtr.", ".conv.")
        k = k.replace("_transformer.transformer.layers.", "_transformer.layers.")
        if k.endswith("self_attn.in_projs.0.weight"):
            base = k[: -len("in_projs.0.weight")]
            d = v.shape[1]
            for name, w in zip("qkv", v.split(d), strict=True):
                if name != "v":
                    w = permute(w, num_heads)
                out[f"{base}{name}_proj.weight"] = w.contiguous()
            continue
        for a, b in ((".self_attn.out_projs.0.", ".self_attn.o_proj."), (".linear1.", ".mlp.fc1."),
                     (".linear2.", ".mlp.fc2."), (".norm1.", ".input_layernorm."),
                     (".norm2.", ".post_attention_layernorm."),
                     (".layer_scale_1.", ".self_attn_layer_scale."),
                     (".layer_scale_2.", ".mlp_layer_scale."),
                     ("quantizer.rvq_first.vq.", "quantizer.semantic_residual_vector_quantizer."),
                     ("quantizer.rvq_rest.vq.", "quantizer.acoustic_residual_vector_quantizer."),
                     ("quantizer.rvq_first.", "quantizer.semantic_residual_vector_quantizer."),
                     ("quantizer.rvq_rest.", "quantizer.acoustic_residual_vector_quantizer."),
                     ("._codebook._initialized", ".codebook.initialized"),
                     ("._codebook.cluster_usage", ".codebook.cluster_usage"),
                     ("._codebook.embedding_sum", ".codebook.embed_sum")):
            k = k.replace(a, b)
        out[k] = v.contiguous()
    return out


def permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Interleaved rows (h, j, r) -> rotate-half rows (h, r, j)."""
    rows, cols = w.shape
    d = rows // heads
    return w.view(heads, d // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def save_both(model, folder: Path, small: bool) -> tuple[Path, Path]:
    """(moshi safetensors file, transformers folder) holding the model's weights."""
    from transformers import MimiConfig

    folder.mkdir(parents=True, exist_ok=True)
    moshi_file = folder / "tokenizer-test-checkpoint.safetensors"
    save_file(moshi_state(model), str(moshi_file))
    hf = folder / "hf"
    hf.mkdir(exist_ok=True)
    cfg = MimiConfig(**(SMALL_HF if small else {}))
    cfg.save_pretrained(hf)
    save_file(hf_state(model, cfg.num_attention_heads), str(hf / "model.safetensors"))
    return moshi_file, hf


def hf_model(folder: Path):
    from transformers import MimiModel

    return MimiModel.from_pretrained(folder, attn_implementation="eager").eval()
