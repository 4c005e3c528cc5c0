"""Every supported Mimi checkpoint -> (canonical state dict, config).

Canonical = MimiModel's own names (model.py). Supported layouts, told apart by tensor names:
- transformers (`kyutai/mimi`: config.json + model.safetensors): flat names (the nested names
  transformers 5 builds in memory are accepted too), separate q/k/v projections with the q and
  k rows permuted for rotate-half RoPE (undone here), codebooks as `embed_sum`/`cluster_usage`;
- moshi (`tokenizer-e351c8d8-checkpoint125.safetensors` in kyutai/moshiko-pytorch-bf16,
  `mimi-pytorch-e351c8d8@125.safetensors` in the Kyutai STT repos): fused `in_proj_weight`
  (or `in_projs.0.weight`), codebooks as `embedding_sum`/`cluster_usage` (or the older
  `embed_sum`/`embed_avg`, `cluster_size`); no config file: the released config, with sizes
  read from the tensors;
- audiotok's own `save_pretrained` output (config.json naming the codec).
Codebooks are folded to embedding_sum / max(cluster_usage, 1e-5).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ...checkpoint import read_json, read_weights, weights_file
from ...errors import CheckpointError
from . import layout_of
from .config import MIMI, MimiConfig

_NESTED = [  # transformers 5's in-memory names -> its flat checkpoint names
    (r"^encoder\.encoder_seanet\.layers\.", "encoder.layers."),
    (r"^encoder\.(encoder_transformer|downsample)\.", r"\1."),
    (r"^decoder\.(decoder_transformer|upsample)\.", r"\1."),
    (r"^decoder\.decoder_seanet\.layers\.", "decoder.layers."),
]
_HF = [
    (r"\.self_attn\.o_proj\.", ".attention.wo."),
    (r"\.mlp\.fc1\.", ".feed_forward.w1."),
    (r"\.mlp\.fc2\.", ".feed_forward.w2."),
    (r"\.input_layernorm\.", ".attention_norm."),
    (r"\.post_attention_layernorm\.", ".ffn_norm."),
    (r"\.self_attn_layer_scale\.scale$", ".attention_layer_scale.gamma"),
    (r"\.mlp_layer_scale\.scale$", ".ffn_layer_scale.gamma"),
    (r"^quantizer\.semantic_residual_vector_quantizer\.", "quantizer.semantic."),
    (r"^quantizer\.acoustic_residual_vector_quantizer\.", "quantizer.acoustic."),
    (r"\.layers\.(\d+)\.codebook\.embed_sum$", r".codebook.\1.sum"),
    (r"\.layers\.(\d+)\.codebook\.cluster_usage$", r".codebook.\1.usage"),
]
_MOSHI = [
    (r"^(en|de)coder\.model\.(\d+)\.conv\.conv\.", r"\1coder.layers.\2.conv."),
    (r"^decoder\.model\.(\d+)\.convtr\.convtr\.", r"decoder.layers.\1.conv."),
    (r"^(en|de)coder\.model\.(\d+)\.block\.(\d)\.conv\.conv\.",
     r"\1coder.layers.\2.block.\3.conv."),
    (r"^(en|de)coder_transformer\.transformer\.layers\.", r"\1coder_transformer.layers."),
    (r"\.self_attn\.(in_proj_weight|in_projs\.0\.weight|in_proj\.weight)$",
     ".attention.wqkv.weight"),
    (r"\.self_attn\.(out_proj\.weight|out_projs\.0\.weight)$", ".attention.wo.weight"),
    (r"\.linear1\.", ".feed_forward.w1."),
    (r"\.linear2\.", ".feed_forward.w2."),
    (r"\.norm1\.", ".attention_norm."),
    (r"\.norm2\.", ".ffn_norm."),
    (r"\.layer_scale_1\.scale$", ".attention_layer_scale.gamma"),
    (r"\.layer_scale_2\.scale$", ".ffn_layer_scale.gamma"),
    (r"^downsample\.conv\.conv\.conv\.", "downsample.conv."),
    (r"^upsample\.convtr\.convtr\.convtr\.", "upsample.conv."),
]
RVQ_NAMES = [  # moshi's split RVQ (also the Qwen3-TTS decoder's) -> audiotok's
    (r"^quantizer\.rvq_first\.", "quantizer.semantic."),
    (r"^quantizer\.rvq_rest\.", "quantizer.acoustic."),
    (r"\.vq\.layers\.(\d+)\._codebook\.(embedding_sum|embed_sum|embed_avg)$", r".codebook.\1.sum"),
    (r"\.vq\.layers\.(\d+)\._codebook\.(cluster_usage|cluster_size)$", r".codebook.\1.usage"),
]
# never read: training state, recomputed buffers
_IGNORED = re.compile(r"(\._initialized|\.inited|codebook\.initialized|_embedding|\._embed)$")
_QK = re.compile(r"\.self_attn\.([qkv])_proj\.weight$")


def checkpoint_file(path: Path) -> Path:
    """The weights file of a checkpoint path (a file, or a folder holding one)."""
    return weights_file(path, ("model.safetensors", "*mimi*.safetensors",
                               "tokenizer-*.safetensors"),
                        "Mimi weights", "model.safetensors, tokenizer-*.safetensors or "
                        "mimi-*.safetensors")


def load_checkpoint(path: Path, config: MimiConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], MimiConfig]:
    """(canonical state dict, config) of a Mimi weights file; `config` overrides the file's."""
    sd = read_weights(path)
    layout = layout_of(sd)
    if layout is None:
        raise CheckpointError(f"{path}: not a Mimi checkpoint (none of the tensor names of the "
                              "transformers, moshi or audiotok layouts)")
    meta = read_json(path.with_name("config.json")) or {}
    if config is None:
        if meta.get("codec") == "mimi":
            config = MimiConfig.from_dict(meta)
        elif meta.get("model_type") == "mimi":
            config = MimiConfig.from_hf(meta)
        else:
            config = config_from_tensors(sd)
    if layout == "hf":
        return from_hf(sd, config, str(path)), config
    sd = without_ignored(sd)
    if layout == "moshi":
        sd = rename(sd, _MOSHI + RVQ_NAMES)
    return fold_codebooks(sd, str(path)), config


def config_from_tensors(sd: dict[str, torch.Tensor]) -> MimiConfig:
    """The released config, with the sizes a moshi state dict shows (widths, layers, codebooks);
    head count, attention window and rates cannot be read from tensors."""
    def levels(prefix):
        pattern = re.compile(prefix + r"\.vq\.layers\.(\d+)\.")
        return len({m.group(1) for k in sd if (m := pattern.match(k))})

    try:
        first = sd["encoder.model.0.conv.conv.weight"]
        linear1 = [k for k in sd if k.endswith("transformer.transformer.layers.0.linear1.weight")]
        semantic = levels(r"quantizer\.rvq_first")
        bins, dim = next(v.shape for k, v in sd.items()
                         if re.search(r"_codebook\.(embedding_sum|embed_sum|embed_avg)$", k))
        layers = {m.group(1) for k in sd
                  if (m := re.match(r"encoder_transformer\.transformer\.layers\.(\d+)\.", k))}
        width = sd["downsample.conv.conv.conv.weight"].shape[0]
    except (KeyError, StopIteration):
        raise CheckpointError("moshi Mimi checkpoint without the encoder's first conv, the "
                              "downsample conv or any codebook") from None
    heads = max(1, width // MIMI.head_dim)
    return MimiConfig(
        dimension=width, n_filters=first.shape[0], num_layers=len(layers), num_heads=heads,
        head_dim=width // heads, intermediate_size=sd[linear1[0]].shape[0] if linear1 else
        MIMI.intermediate_size, codebook_size=bins, codebook_dim=dim,
        num_quantizers=semantic + levels(r"quantizer\.rvq_rest"),
        num_semantic_quantizers=semantic)


def rename(sd: dict, table) -> dict:
    out = {}
    for key, value in sd.items():
        for pattern, repl in table:
            key = re.sub(pattern, repl, key)
        out[key] = value
    return out


def without_ignored(sd: dict) -> dict:
    """sd without training state and recomputed buffers."""
    return {k: v for k, v in sd.items() if not _IGNORED.search(k)}


def from_hf(sd: dict, cfg: MimiConfig, source: str) -> dict:
    """The canonical state dict of transformers-layout Mimi weights (also the encoder of the
    Qwen3-TTS tokenizer, its `encoder.` prefix taken off)."""
    return fold_codebooks(_from_hf(without_ignored(sd), cfg), source)


def _from_hf(sd: dict, cfg: MimiConfig) -> dict:
    return fuse_qkv(rename(rename(sd, _NESTED), _HF), cfg.num_heads, cfg.head_dim)


def fuse_qkv(sd: dict, heads: int, head_dim: int, kv_heads: int | None = None) -> dict:
    """transformers' `<layer>.self_attn.{q,k,v}_proj.weight` -> audiotok's fused
    `<layer>.attention.wqkv.weight`, the q and k rows permuted from rotate-half RoPE back to
    interleaved pairs (nn/transformer.py)."""
    out, qkv = {}, {}
    for key, value in sd.items():
        m = _QK.search(key)
        if m is None:
            out[key] = value
            continue
        prefix = key[: m.start()]
        if m.group(1) != "v":  # rotate-half rows (h, r, j) back to interleaved (h, j, r)
            n = heads if m.group(1) == "q" else kv_heads or heads
            value = value.reshape(n, 2, head_dim // 2, -1).transpose(1, 2)
            value = value.reshape(n * head_dim, -1)
        qkv.setdefault(prefix, {})[m.group(1)] = value
    for prefix, parts in qkv.items():
        if set(parts) != {"q", "k", "v"}:
            raise CheckpointError(f"{prefix}.self_attn: q_proj, k_proj and v_proj must all be "
                                  f"present (found {sorted(parts)})")
        out[prefix + ".attention.wqkv.weight"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out


def fold_codebooks(sd: dict, source: str) -> dict:
    """`<rvq>.codebook.<i>.sum` / `.usage` -> `<rvq>.codebook` [levels, bins, dim]."""
    out = {k: v for k, v in sd.items() if ".codebook." not in k}
    for rvq in ("quantizer.semantic", "quantizer.acoustic"):
        found = sorted({int(m.group(1)) for k in sd
                        if (m := re.match(re.escape(rvq) + r"\.codebook\.(\d+)\.", k))})
        if found != list(range(len(found))):
            raise CheckpointError(f"{source}: {rvq} codebooks {found} are not numbered 0..n-1")
        rows = []
        for i in found:
            total, usage = sd.get(f"{rvq}.codebook.{i}.sum"), sd.get(f"{rvq}.codebook.{i}.usage")
            if total is None or usage is None:
                raise CheckpointError(f"{source}: codebook {i} of {rvq} lacks its embedding sum "
                                      "or its cluster usage")
            rows.append(total.float() / usage.float().clamp(min=1e-5)[:, None])
        if rows:
            out[f"{rvq}.codebook"] = torch.stack(rows)
    return out
