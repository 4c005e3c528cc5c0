"""BiCodec checkpoints -> (canonical state dict, config).

Spark-TTS's model folder (the hub's `SparkAudio/Spark-TTS-0.5B`): `BiCodec/model.safetensors`
and `BiCodec/config.yaml`, the folder's `config.yaml`, and `wav2vec2-large-xlsr-53/` (a
transformers folder: `config.json` and `pytorch_model.bin` or `model.safetensors`, with or
without the `wav2vec2.` prefix of a pretraining checkpoint). Weight norms (either spelling)
are folded; the postnet, the ECAPA's pooling head, the stored mel filters and the training
buffers are dropped; of wav2vec2 only the layers the features read are kept. Also audiotok's
own save (model.safetensors + config.json).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...checkpoint import fold_weight_norm, read_json, read_safetensors, read_weights
from ...errors import CheckpointError, ConfigError
from ...nn.hubert import HubertConfig, fold_positional_conv
from . import CODEC_FILES, spark_folder
from .config import XLSR, BiCodecConfig

CODEC, CODEC_YAML = (Path(f) for f in CODEC_FILES)
WAV2VEC2 = "wav2vec2-large-xlsr-53"
WAV2VEC2_FILES = ("model.safetensors", "pytorch_model.bin")
DROPPED = ("postnet.", "mel_transformer.", "speaker_encoder.speaker_encoder.pool.",
           "speaker_encoder.speaker_encoder.bn.", "speaker_encoder.speaker_encoder.linear.",
           "speaker_encoder.speaker_encoder.bn2.")
W2V_KEPT = ("feature_extractor.", "feature_projection.", "encoder.")


def load_checkpoint(path: Path, config: BiCodecConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], BiCodecConfig, str]:
    """(state dict, config, the file loaded) of audiotok's save or Spark's model folder."""
    path = Path(path)
    own = path if path.is_file() else path / "model.safetensors"
    d = read_json(own.with_name("config.json")) if own.suffix == ".safetensors" else None
    if d is not None and d.get("codec") == "bicodec" and own.is_file():
        try:
            return read_safetensors(own), config or BiCodecConfig.from_dict(d), str(own)
        except ConfigError as e:
            raise CheckpointError(f"{own}: {e}") from None
    folder = spark_folder(path)
    if folder is None:
        raise CheckpointError(f"{path}: no BiCodec weights here (expected Spark-TTS's model "
                              f"folder with {CODEC} and {CODEC_YAML}, or audiotok's "
                              "model.safetensors beside a config.json)")
    w2v_file = next((folder / WAV2VEC2 / f for f in WAV2VEC2_FILES
                     if (folder / WAV2VEC2 / f).is_file()), None)
    if w2v_file is None:
        raise CheckpointError(f"{folder}: BiCodec's features come from {WAV2VEC2}/ (config.json "
                              f"and {' or '.join(WAV2VEC2_FILES)}), not found")
    w2v_sd = wav2vec2_state_dict(read_weights(w2v_file), w2v_file)
    if config is None:
        config = spark_config(folder, w2v_sd)
    sd = {k: v for k, v in fold_weight_norm(read_safetensors(folder / CODEC)).items()
          if not k.startswith(DROPPED) and not k.endswith("num_batches_tracked")
          and k != "quantizer.cluster_size"}
    layers = max(config.feature_layers)
    for k, v in w2v_sd.items():
        parts = k.split(".")
        if k.startswith("encoder.layers.") and int(parts[2]) >= layers:
            continue
        sd["wav2vec2." + k] = v
    return sd, config, str(folder / CODEC)


def wav2vec2_state_dict(raw: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """transformers' Wav2Vec2Model tensors (prefix `wav2vec2.` removed where a pretraining
    checkpoint has it; its quantizer and heads dropped), the positional convolution folded."""
    if any(k.startswith("wav2vec2.") for k in raw):
        raw = {k.removeprefix("wav2vec2."): v for k, v in raw.items() if k.startswith("wav2vec2.")}
    sd = {k: v for k, v in raw.items() if k.startswith(W2V_KEPT)}
    if "feature_projection.projection.weight" not in sd:
        raise CheckpointError(f"{path}: not a wav2vec2 checkpoint (no "
                              "feature_projection.projection.weight)")
    return fold_positional_conv(sd, "")


def spark_config(folder: Path, w2v_sd: dict[str, torch.Tensor]) -> BiCodecConfig:
    """BiCodecConfig from Spark's yaml files and the wav2vec2's config.json (the sizes its
    tensors tell win)."""
    import yaml

    def yaml_file(p: Path) -> dict:
        if not p.is_file():
            return {}
        try:
            d = yaml.safe_load(p.read_text())
        except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{p}: unreadable yaml ({e})") from None
        return d if isinstance(d, dict) else {}

    codec = yaml_file(folder / CODEC_YAML).get("audio_tokenizer")
    if not isinstance(codec, dict):
        raise CheckpointError(f"{folder / CODEC_YAML}: no audio_tokenizer section")
    hf = read_json(folder / WAV2VEC2 / "config.json") or {}
    if hf and not (hf.get("do_stable_layer_norm", True) and
                   hf.get("feat_extract_norm", "layer") == "layer"):
        raise CheckpointError(f"{folder / WAV2VEC2}: BiCodec's wav2vec2 is XLSR-53's layout "
                              "(stable layer norm); this one is not")
    shapes = {k: list(v.shape) for k, v in w2v_sd.items()}
    try:
        told = HubertConfig.from_shapes(shapes, "", heads=int(hf.get("num_attention_heads",
                                                                     XLSR.heads)),
                                        conv_strides=tuple(hf.get("conv_stride",
                                                                  XLSR.conv_strides)),
                                        layer_norm_eps=float(hf.get("layer_norm_eps", 1e-5)))
        w2v = dataclasses.replace(XLSR, **told)
        if not w2v.stable_layer_norm:
            raise ConfigError("the wav2vec2 weights are not XLSR-53's layout (stable layer norm)")
        return BiCodecConfig.from_spark(codec, yaml_file(folder / "config.yaml"), w2v)
    except (ConfigError, KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{folder}: {e}") from None
