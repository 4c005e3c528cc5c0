"""Every supported NeuCodec checkpoint -> (canonical state dict, config, the file loaded).

Canonical = X-Codec2's (transformers' names, models/xcodec2/weights.py). Supported:
- transformers layout (`NeuCodecModel`: config.json + model.safetensors, which holds the
  semantic model too; also our own `save_pretrained` output);
- the neucodec package's `pytorch_model.bin` (hub neuphonic/neucodec): X-Codec2's training
  names with legacy weight norm (`weight_g`/`weight_v`) in the acoustic encoder and SnakeBeta's
  beta as `act.beta`; training heads (`fc_post_s`, `SemanticDecoder`) are skipped. Decoder
  convolutions may be stored both plainly and as a weight-norm pair: the package builds plain
  convolutions and loads the plain weight (the pair goes unused), and so does this loader. The
  semantic model is not in that file: as the package does, it comes from facebook/w2v-bert-2.0
  (through the hub and its cache), of which the first 16 layers are read.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open

from ...checkpoint import read_torch, weights_file
from ...errors import CheckpointError
from ..family import Preset
from ..xcodec2 import weights as xcodec2_weights
from .config import NEUCODEC, NeuCodecConfig

SEMANTIC_MODEL = Preset("w2v-bert-2.0", "facebook/w2v-bert-2.0", ("model.safetensors",))
TRAINING_HEADS = ("fc_post_s.", "SemanticDecoder.")
_WN_SUFFIXES = (".weight_g", ".weight_v", ".parametrizations.weight.original0",
                ".parametrizations.weight.original1")


def load_checkpoint(path: Path, config: NeuCodecConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], NeuCodecConfig, str]:
    file = weights_file(path, ("model.safetensors", "pytorch_model.bin"), "NeuCodec weights",
                        "model.safetensors with its config.json, or pytorch_model.bin")
    if file.suffix == ".safetensors":
        sd, config = xcodec2_weights.load_checkpoint(file, config, NEUCODEC)
        return sd, config, str(file)
    sd = package_tensors(read_torch(file), file)
    if not any(k.startswith("semantic_model.") for k in sd):
        sd.update(semantic_tensors(semantic_file()))
    if config is None:
        config = xcodec2_weights.infer_original_config(
            {k: list(v.shape) for k, v in sd.items()}, file, NEUCODEC)
    sd = {k: v for k, v in sd.items() if xcodec2_weights.is_used(k, config)}
    return xcodec2_weights.original_to_canonical(sd, config), config, str(file)


def package_tensors(sd: dict[str, torch.Tensor], file: Path) -> dict[str, torch.Tensor]:
    """The tensors of a neucodec pytorch_model.bin the model reads: training heads dropped,
    and weight-norm pairs beside a plain weight dropped (the package loads the plain one)."""
    if not any(k.startswith("CodecEnc.") for k in sd):
        other = " (DistillNeuCodec's: load it as distill-neucodec)" if any(
            k.startswith("codec_encoder.") for k in sd) else ""
        raise CheckpointError(f"{file}: not a NeuCodec checkpoint (no CodecEnc.* tensors){other}")
    out = {}
    for key, value in sd.items():
        if key.startswith(TRAINING_HEADS):
            continue
        base = next((key[: -len(s)] for s in _WN_SUFFIXES if key.endswith(s)), None)
        if base is not None and base + ".weight" in sd:
            continue
        out[key] = value
    return out


def semantic_file() -> Path:
    """facebook/w2v-bert-2.0's weights, fetched as the neucodec package fetches them."""
    from ... import hub

    return hub.fetch(SEMANTIC_MODEL)


def semantic_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Wav2Vec2-BERT's feature projection and encoder tensors named as in NeuCodec's model
    (`semantic_model.*`), the layers past those used not read."""
    try:
        handle = safe_open(str(path), "pt")
    except Exception as e:  # SafetensorError, OSError
        raise CheckpointError(f"{path}: cannot read the semantic model's weights ({e})") from None
    out = {}
    with handle as f:
        for key in f.keys():
            name = key.removeprefix("wav2vec2_bert.")
            if name.startswith(("feature_projection.", "encoder.")) and \
                    xcodec2_weights.is_used("semantic_model." + name, NEUCODEC):
                out["semantic_model." + name] = f.get_tensor(key)
    if not any(k.startswith("semantic_model.encoder.layers.") for k in out):
        raise CheckpointError(f"{path}: not Wav2Vec2-BERT weights (no encoder layers)")
    return out
