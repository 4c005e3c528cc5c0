"""Qwen3-TTS 12 Hz tokenizer checkpoints -> (canonical state dict, config).

The hub layout (`Qwen/Qwen3-TTS-Tokenizer-12Hz`, and `speech_tokenizer/` inside the Qwen3-TTS
model repos): config.json (`model_type: qwen3_tts_tokenizer_12hz`) + model.safetensors, with
`encoder.*` a transformers MimiModel's flat names (mapped by models/mimi/weights.py) and
`decoder.*` qwen-tts's names: the transformer's separate q/k/v projections (rows permuted for
rotate-half RoPE), its SwiGLU as gate/up/down, the split RVQ as moshi names it; audiotok's own
save_pretrained output (config.json naming the codec) loads as it is."""

from __future__ import annotations

from pathlib import Path

import torch

from ...checkpoint import read_json, read_weights
from ...errors import CheckpointError
from ..mimi import weights as mimi
from . import MODEL_TYPE
from .config import Qwen3TtsConfig

_TRANSFORMER = [
    (r"\.self_attn\.o_proj\.", ".attention.wo."),
    (r"\.mlp\.gate_proj\.", ".feed_forward.w1."),
    (r"\.mlp\.up_proj\.", ".feed_forward.w3."),
    (r"\.mlp\.down_proj\.", ".feed_forward.w2."),
    (r"\.input_layernorm\.", ".attention_norm."),
    (r"\.post_attention_layernorm\.", ".ffn_norm."),
    (r"\.self_attn_layer_scale\.scale$", ".attention_layer_scale.gamma"),
    (r"\.mlp_layer_scale\.scale$", ".ffn_layer_scale.gamma"),
]


def checkpoint_file(path: Path) -> Path:
    """The weights file of a checkpoint path: a file, a folder holding model.safetensors, or a
    Qwen3-TTS model folder holding the tokenizer in speech_tokenizer/."""
    path = Path(path)
    if path.is_file():
        return path
    for folder in (path, path / "speech_tokenizer"):
        if (folder / "model.safetensors").is_file():
            return folder / "model.safetensors"
    raise CheckpointError(f"{path}: no Qwen3-TTS tokenizer weights here (expected "
                          "model.safetensors, or speech_tokenizer/model.safetensors)")


def load_checkpoint(path: Path, config: Qwen3TtsConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], Qwen3TtsConfig]:
    """(canonical state dict, config) of a weights file; `config` overrides the file's."""
    meta = read_json(path.with_name("config.json")) or {}
    ours = meta.get("codec") == "qwen3-tts"
    if config is None:
        if ours:
            config = Qwen3TtsConfig.from_dict(meta)
        elif meta.get("model_type") == MODEL_TYPE:
            config = Qwen3TtsConfig.from_hf(meta)
        else:
            raise CheckpointError(f"{path}: no config.json of a Qwen3-TTS tokenizer beside it "
                                  f"(model_type {MODEL_TYPE!r})")
    sd = read_weights(path)
    if ours:
        return sd, config
    parts = {"encoder": {}, "decoder": {}}
    for key, value in sd.items():
        part, _, rest = key.partition(".")
        if part not in parts:
            raise CheckpointError(f"{path}: unexpected tensor {key!r} (neither encoder.* nor "
                                  "decoder.*)")
        parts[part][rest] = value
    dec = config.decoder
    encoder = mimi.from_hf(parts["encoder"], config.encoder, str(path))
    decoder = mimi.rename(mimi.without_ignored(parts["decoder"]),
                          mimi.RVQ_NAMES + _TRANSFORMER)
    decoder = mimi.fuse_qkv(decoder, dec.num_attention_heads, dec.head_dim,
                            dec.num_key_value_heads)
    decoder = mimi.fold_codebooks(decoder, str(path))
    return {**{f"encoder.{k}": v for k, v in encoder.items()},
            **{f"decoder.{k}": v for k, v in decoder.items()}}, config
