"""DistillNeuCodec checkpoints -> (canonical state dict, config, the file loaded).

- the neucodec package's `pytorch_model.bin` (hub neuphonic/distill-neucodec): weight norm as
  parametrizations (or `weight_g`/`weight_v`), folded; the positional convolution of the
  semantic model normalised over its kernel axis (weight norm dim 2); the shared parts renamed as
  X-Codec2's; `semantic_model.*` (DistilHuBERT) from ntu-spml/distilhubert through the hub when
  the file lacks it, as the package does;
- our own `save_pretrained` output (config.json naming the codec + model.safetensors).
Sizes of a package file are read from its tensor shapes; what shapes cannot tell (attention
heads, convolution strides, attention windows) are the released model's, or those a
`config.json` beside it describes (`{"codec_decoder": {"heads": N}, "acoustic_window": W}`).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ...checkpoint import read_json, read_safetensors, read_torch, weights_file
from ...errors import CheckpointError, ConfigError, ModelNotFoundError
from ...nn.hubert import HubertConfig, fold_positional_conv
from ..family import Preset
from ..xcodec2 import weights as xcodec2_weights
from .config import DISTILL, DistillNeuCodecConfig

SEMANTIC_MODEL = "ntu-spml/distilhubert"
_IGNORED = ("codec_encoder.en_encoder.cache_token", "semantic_model.masked_spec_embed")


def load_checkpoint(path: Path, config: DistillNeuCodecConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], DistillNeuCodecConfig, str]:
    file = weights_file(path, ("model.safetensors", "pytorch_model.bin"),
                        "DistillNeuCodec weights",
                        "pytorch_model.bin, or model.safetensors with its config.json")
    if file.suffix == ".safetensors":  # save_pretrained: canonical names
        if config is None:
            d = read_json(file.parent / "config.json")
            if d is None:
                raise CheckpointError(f"{file}: DistillNeuCodec weights need their config.json")
            config = DistillNeuCodecConfig.from_dict(d)
        return read_safetensors(file), config, str(file)
    sd = {k: v for k, v in read_torch(file).items() if k not in _IGNORED}
    if not any(k.startswith("codec_encoder.") for k in sd):
        raise CheckpointError(f"{file}: not a DistillNeuCodec checkpoint (no codec_encoder.* "
                              "tensors)")
    if not any(k.startswith("semantic_model.") for k in sd):
        sd.update({"semantic_model." + k: v for k, v in semantic_tensors().items()
                   if not k.startswith("masked_spec_embed")})
    sd = fold_positional_conv(sd, "semantic_model.")
    if config is None:
        config = infer_config({k: list(v.shape) for k, v in sd.items()}, file)
    sd = {k: v for k, v in sd.items() if xcodec2_weights.is_used(k, config)}
    return xcodec2_weights.original_to_canonical(sd, config), config, str(file)


def semantic_tensors() -> dict[str, torch.Tensor]:
    """DistilHuBERT's weights from the hub (its cache offline), as the package fetches them."""
    from ... import hub

    for name in ("model.safetensors", "pytorch_model.bin"):
        try:
            path = hub.fetch(Preset("distilhubert", SEMANTIC_MODEL, (name,)))
        except ModelNotFoundError:
            continue
        sd = read_safetensors(path) if name.endswith(".safetensors") else read_torch(path)
        return {k.removeprefix("hubert."): v for k, v in sd.items()}
    raise ModelNotFoundError(f"cannot get {SEMANTIC_MODEL} (DistillNeuCodec's semantic model) "
                             "from the Hugging Face Hub or its cache")


def infer_config(shapes: dict[str, list[int]], file: Path) -> DistillNeuCodecConfig:
    def shape(key: str) -> list[int]:
        for k in (key, key.replace(".weight", ".parametrizations.weight.original1"),
                  key + "_v"):
            if k in shapes:
                return shapes[k]
        raise CheckpointError(f"{file}: DistillNeuCodec checkpoint without {key}")

    def count(pattern: str) -> int:
        return len({m[1] for k in shapes if (m := re.match(pattern, k))})

    try:
        hubert = HubertConfig.from_shapes(shapes, "semantic_model.")
    except KeyError as e:
        raise CheckpointError(f"{file}: DistillNeuCodec checkpoint without {e.args[0]}") from None
    units = count(r"codec_encoder\.encoder\.blocks\.(\d+)\.")
    dims = [shape("codec_encoder.encoder.blocks.0.conv_2.weight")[0]]
    dims += [shape(f"codec_encoder.encoder.blocks.{i}.0.weight")[0] for i in range(2, units - 2, 2)]
    extra = read_json(file.parent / "config.json") or {}
    hidden = shape("generator.backbone.embed.weight")[0]
    decoder_heads = int(extra.get("codec_decoder", {}).get("heads", DISTILL.num_attention_heads))
    try:
        return DistillNeuCodecConfig(
            hidden_size=hidden,
            num_hidden_layers=count(r"generator\.backbone\.transformers\.(\d+)\."),
            num_attention_heads=decoder_heads, head_dim=hidden // decoder_heads,
            intermediate_size=shape("generator.backbone.transformers.0.mlp.fc1.weight")[0],
            quantization_dim=shape("fc_prior.weight")[0],
            quantization_levels=(4,) * shape("generator.quantizer.project_in.weight")[0],
            **{"hubert_" + k: v for k, v in hubert.items()
               if k not in ("projection_norm", "stable_layer_norm")},
            adapter_size=shape("SemanticEncoder_module.initial_conv.weight")[0],
            acoustic_dims=tuple(dims),
            acoustic_dim=shape(f"codec_encoder.encoder.blocks.{units - 1}.weight")[0],
            acoustic_window=int(extra.get("acoustic_window", DISTILL.acoustic_window)),
            acoustic_depth=2 + count(r"codec_encoder\.en_encoder\.local_trans\.layers\.(\d+)\."),
        )
    except ConfigError as e:
        raise CheckpointError(f"{file}: inconsistent DistillNeuCodec checkpoint ({e})") from None
