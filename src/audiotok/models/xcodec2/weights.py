"""Every supported X-Codec2 checkpoint -> (canonical state dict, config).

Canonical = transformers' Xcodec2Model names (the HKUSTAudio/xcodec2-hf layout) without the
unused `masked_spec_embed`. Supported:
- transformers layout: config.json + model.safetensors (also our own `save_pretrained` output);
- original layout (HKUSTAudio/xcodec2 model.safetensors, training names): weight norm as
  `weight_g/weight_v` or `parametrizations.weight.original0/1`, SnakeBeta beta as `beta` or
  `bias`, fused `c_attn` with interleaved RoPE rows, a Wav2Vec2-BERT of which only the first
  16 layers are read (the model uses hidden_states[16]); filter and window buffers are ignored.
Only the tensors the model uses are read from disk.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors import safe_open

from ...checkpoint import fold_weight_norm, read_json
from ...errors import CheckpointError, ConfigError
from . import layout_of
from .config import XCODEC2, SemanticConfig, XCodec2Config

SEMANTIC_LAYERS_USED = 16  # the original takes hidden_states[16]

_ORIGINAL_RENAMES = [
    (r"^semantic_model\.", "semantic_encoder."),
    (r"^SemanticEncoder_module\.initial_conv\.", "semantic_adapter.conv1."),
    (r"^SemanticEncoder_module\.residual_blocks\.1\.", "semantic_adapter.conv2."),
    (r"^SemanticEncoder_module\.residual_blocks\.3\.", "semantic_adapter.conv3."),
    (r"^SemanticEncoder_module\.final_conv\.", "semantic_adapter.conv4."),
    (r"^CodecEnc\.conv_blocks\.0\.", "acoustic_encoder.conv1."),
    (r"^CodecEnc\.conv_blocks\.(\d+)\.block\.(\d)\.block\.([0-3])\.", None),  # residual units
    (r"^CodecEnc\.conv_blocks\.(\d+)\.block\.3\.", None),
    (r"^CodecEnc\.conv_blocks\.(\d+)\.block\.4\.", None),
    (r"^CodecEnc\.conv_final_block\.0\.", "acoustic_encoder.snake1."),
    (r"^CodecEnc\.conv_final_block\.1\.", "acoustic_encoder.conv2."),
    (r"^fc_prior\.", "fc_encoder."),
    (r"^generator\.quantizer\.project_(in|out)\.", r"quantizer.project_\1."),
    (r"^fc_post_a\.", "acoustic_decoder.fc."),
    (r"^generator\.backbone\.embed\.", "acoustic_decoder.embed."),
    (r"^generator\.backbone\.(prior_net|post_net)\.", r"acoustic_decoder.\1."),
    (r"^generator\.backbone\.transformers\.(\d+)\.att\.c_proj\.",
     r"acoustic_decoder.layers.\1.self_attn.o_proj."),
    (r"^generator\.backbone\.transformers\.(\d+)\.att_norm\.",
     r"acoustic_decoder.layers.\1.input_layernorm."),
    (r"^generator\.backbone\.transformers\.(\d+)\.ffn_norm\.",
     r"acoustic_decoder.layers.\1.post_attention_layernorm."),
    (r"^generator\.backbone\.transformers\.(\d+)\.mlp\.", r"acoustic_decoder.layers.\1.mlp."),
    (r"^generator\.backbone\.final_layer_norm\.", "acoustic_decoder.norm."),
    (r"^generator\.head\.out\.", "acoustic_decoder.head.linear."),
]
_RESIDUAL_PARTS = ("snake1", "conv1", "snake2", "conv2")
_C_ATTN = re.compile(r"^generator\.backbone\.transformers\.(\d+)\.att\.c_attn\.weight$")
# never read: recomputed buffers, training-only embeddings
_IGNORED = re.compile(r"(upsample\.filter|downsample\.lowpass\.filter|istft\.window|"
                      r"masked_spec_embed|\._levels|\._basis|implicit_codebook|\.scales|"
                      r"rotary_emb\.|\.theta$|\.cache$)")
_SEMANTIC_LAYER = re.compile(r"^(?:semantic_model|semantic_encoder)\.encoder\.layers\.(\d+)\.")


def checkpoint_file(path: Path) -> Path:
    path = Path(path)
    if path.is_dir():
        if (path / "model.safetensors").exists():
            return path / "model.safetensors"
        raise CheckpointError(f"{path}: no model.safetensors in this directory")
    return path


def load_checkpoint(path: Path, config: XCodec2Config | None = None,
                    base: XCodec2Config = XCODEC2) -> tuple[dict[str, torch.Tensor], XCodec2Config]:
    """`base`: the released configuration of the codec being loaded (X-Codec2's, or NeuCodec's
    from models/neucodec): its class reads config.json, and it fills in what tensor shapes of
    an original-layout file do not tell."""
    path = checkpoint_file(path)
    if path.suffix != ".safetensors":
        raise CheckpointError(f"{path}: not an X-Codec2 checkpoint (expected model.safetensors; "
                              "a .pth or .gguf file is an S2 codec checkpoint)")
    try:
        handle = safe_open(str(path), "pt")
    except Exception as e:  # SafetensorError, OSError
        raise CheckpointError(f"{path}: cannot read safetensors file ({e}); the file is "
                              "truncated, corrupt or not safetensors") from None
    with handle as f:
        keys = list(f.keys())
        layout = layout_of(keys)
        if layout is None:
            hint = (" (it looks like an S2 codec checkpoint)"
                    if any(k.startswith(("encoder.block.", "quantizer.")) for k in keys) else "")
            raise CheckpointError(f"{path}: not an X-Codec2 checkpoint{hint}")
        if config is None:
            config = sibling_config(path, layout, base)
        if config is None:
            if layout == "hf":
                raise CheckpointError(f"{path}: transformers-layout weights need the config.json "
                                      "that comes with them")
            config = infer_original_config({k: f.get_slice(k).get_shape() for k in keys}, path,
                                           base)
        wanted = [k for k in keys if is_used(k, config)]
        try:
            sd = {k: f.get_tensor(k) for k in wanted}
        except Exception as e:
            raise CheckpointError(f"{path}: cannot read tensors ({e}); the file is truncated or "
                                  "corrupt") from None
    if layout == "original":
        sd = original_to_canonical(sd, config)
    return sd, config


def is_used(key: str, config: XCodec2Config) -> bool:
    """Whether the model reads this tensor (not a recomputed buffer, a training-only tensor or
    a semantic layer past the one whose output is used)."""
    m = _SEMANTIC_LAYER.match(key)
    return not _IGNORED.search(key) and \
        not (m and int(m[1]) >= config.semantic.num_hidden_layers)


def sibling_config(path: Path, layout: str, base: XCodec2Config = XCODEC2
                   ) -> XCodec2Config | None:
    p = path.parent / "config.json"
    d = read_json(p)
    if d is None:
        return None
    kind = type(base)
    if d.get("codec", kind.codec) != kind.codec:
        raise ConfigError(f"{p}: config of codec {d.get('codec')!r}, not of {kind.title}")
    if layout == "hf" or d.get("model_type") == kind.codec and "semantic_model_config" in d:
        return kind.from_dict(d)
    return None  # the original repository's config carries no sizes; read them from shapes


def infer_original_config(shapes: dict[str, list[int]], path: Path,
                          base: XCodec2Config = XCODEC2) -> XCodec2Config:
    """Sizes of an original-layout file from its tensor shapes (name -> shape). What shapes
    cannot tell (decoder heads, relative-position window split) comes from a descriptive
    config.json beside the file when it has them, else from the released model's values."""
    extra = _original_extra(path)
    title = type(base).title

    def shape(key: str) -> list[int]:
        for k in (key, key + "_v", key.replace(".weight", ".parametrizations.weight.original1")):
            if k in shapes:
                return list(shapes[k])
        raise CheckpointError(f"{path}: original-layout {title} checkpoint without {key}")

    keys = list(shapes)
    n_blocks = _count_indices(keys, re.compile(r"CodecEnc\.conv_blocks\.(\d+)\.block\.4\."))
    n_layers = _count_indices(keys, re.compile(r"generator\.backbone\.transformers\.(\d+)\."))
    n_semantic = _count_indices(keys, _SEMANTIC_LAYER)
    used = extra.get("semantic_layers", SEMANTIC_LAYERS_USED)
    if n_semantic < used:
        raise CheckpointError(f"{path}: the semantic model has {n_semantic} layers; {title} uses "
                              f"the output of layer {used}")
    hidden = shape("CodecEnc.conv_final_block.1.weight")[0]
    sem_hidden = shape("semantic_model.feature_projection.projection.weight")[0]
    head_size = shape("semantic_model.encoder.layers.0.self_attn.distance_embedding.weight")[1]
    distances = shape("semantic_model.encoder.layers.0.self_attn.distance_embedding.weight")[0]
    left = base.semantic.left_max_position_embeddings
    heads = extra.get("decoder_heads", base.num_attention_heads)
    try:
        return type(base)(
            encoder_hidden_size=shape("CodecEnc.conv_blocks.0.weight")[0],
            downsampling_ratios=tuple(shape(f"CodecEnc.conv_blocks.{i}.block.4.weight")[2] // 2
                                      for i in range(1, n_blocks + 1)),
            hidden_size=hidden,
            num_hidden_layers=n_layers,
            num_attention_heads=heads,
            head_dim=hidden // heads,
            intermediate_size=shape("generator.backbone.transformers.0.mlp.fc1.weight")[0],
            quantization_dim=shape("fc_prior.weight")[0],
            quantization_levels=(4,) * shape("generator.quantizer.project_in.weight")[0],
            semantic=SemanticConfig(
                hidden_size=sem_hidden,
                num_hidden_layers=used,
                num_attention_heads=sem_hidden // head_size,
                intermediate_size=shape(
                    "semantic_model.encoder.layers.0.ffn1.intermediate_dense.weight")[0],
                feature_projection_input_dim=shape(
                    "semantic_model.feature_projection.projection.weight")[1],
                conv_depthwise_kernel_size=shape(
                    "semantic_model.encoder.layers.0.conv_module.depthwise_conv.weight")[2],
                left_max_position_embeddings=left,
                right_max_position_embeddings=distances - 1 - left,
            ),
        )
    except ConfigError as e:
        raise CheckpointError(f"{path}: inconsistent {title} checkpoint ({e})") from None


def _count_indices(keys: list[str], pattern: re.Pattern) -> int:
    """Number of distinct values of the pattern's first group among the keys."""
    return len({m[1] for k in keys if (m := pattern.match(k))})


def _original_extra(path: Path) -> dict:
    """Decoder heads / semantic layer index from a config.json beside an original-layout file
    (our golden files describe them; the hub repository's config does not)."""
    d = read_json(path.parent / "config.json") or {}
    out = {}
    dec = d.get("codec_decoder")
    if isinstance(dec, dict) and "heads" in dec:
        out["decoder_heads"] = int(dec["heads"])
    sem = d.get("semantic_model")
    if isinstance(sem, dict) and "hidden_state_index_used" in sem:
        out["semantic_layers"] = int(sem["hidden_state_index_used"])
    return out


def original_to_canonical(sd: dict[str, torch.Tensor], cfg: XCodec2Config
                          ) -> dict[str, torch.Tensor]:
    """Original (training) names -> transformers names, weight norm folded, c_attn split."""
    out = {}
    for key, value in fold_weight_norm(sd).items():
        m = _C_ATTN.match(key)
        if m:
            out.update(_split_c_attn(value, int(m[1]), cfg))
            continue
        if key.endswith(".act.bias"):  # SnakeBeta beta in the pip package's spelling
            key = key[: -len("bias")] + "beta"
        out[_rename(key)] = value
    return out


def _rename(key: str) -> str:
    for pattern, target in _ORIGINAL_RENAMES:
        m = re.match(pattern, key)
        if not m:
            continue
        rest = key[m.end():]
        if target is not None:
            return m.expand(target) + rest
        block = int(m[1]) - 1
        if pattern.endswith(r"block\.([0-3])\."):  # residual unit u, part p
            unit, part = int(m[2]) + 1, _RESIDUAL_PARTS[int(m[3])]
            return f"acoustic_encoder.block.{block}.res_unit{unit}.{part}.{rest}"
        part = "snake1" if r"block\.3" in pattern else "conv1"
        return f"acoustic_encoder.block.{block}.{part}.{rest}"
    return key  # unknown names surface as "unexpected tensor" errors


def _split_c_attn(w: torch.Tensor, layer: int, cfg: XCodec2Config) -> dict[str, torch.Tensor]:
    """Fused [q; k; v] -> q/k/v_proj, with q and k rows moved from interleaved RoPE pairs
    (2j, 2j+1) to rotate-half order (j, j + D/2) within each head."""
    inner = cfg.num_attention_heads * cfg.head_dim
    if w.shape[0] != 3 * inner:
        raise CheckpointError(f"generator.backbone.transformers.{layer}.att.c_attn.weight has "
                              f"shape {list(w.shape)}, expected [{3 * inner}, {w.shape[1]}]")
    q, k, v = w.split(inner)
    heads, d = cfg.num_attention_heads, cfg.head_dim

    def to_half(t: torch.Tensor) -> torch.Tensor:
        return t.view(heads, d // 2, 2, -1).transpose(1, 2).reshape(inner, -1)

    prefix = f"acoustic_decoder.layers.{layer}.self_attn."
    return {prefix + "q_proj.weight": to_half(q), prefix + "k_proj.weight": to_half(k),
            prefix + "v_proj.weight": v.clone()}
