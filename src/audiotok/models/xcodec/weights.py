"""X-Codec family checkpoints -> (canonical state dict, config).

Four layouts: Boson's hub folder (`config.json`: HiggsAudioTokenizer's arguments, and
`model.pth`: the model's state dict, weight norm as `weight_g`/`weight_v`, HuBERT as
transformers' HubertModel); X-Codec's own (a `.pth` of the same names beside its training
yaml, `generator: {name: SoundStream, config: ...}`; YuE's xcodec_mini_infer wraps the state
dict in `codec_model`); transformers' (`config.json` with `model_type`
"higgs_audio_v2_tokenizer" or "xcodec", `model.safetensors`, weight norm folded or as
parametrizations); audiotok's own save. Training-only tensors (the semantic decoder, fc_post1,
the codebooks' EMA statistics) are dropped; the widths Boson's code fixes (encoder 64, decoder
1024, HuBERT's) are read from the tensors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import torch

from ...checkpoint import (
    fold_weight_norm,
    read_json,
    read_safetensors,
    read_torch_object,
    weights_file,
)
from ...errors import CheckpointError, ConfigError
from ...nn.hubert import HubertConfig, fold_positional_conv
from . import soundstream_config
from .config import XCodecConfig

HF_TYPES = ("higgs_audio_v2_tokenizer", "xcodec")
_TRAINING = ("decoder_semantic.", "fc_post1.", "semantic_model.masked_spec_embed")
_UNIT = {"snake1": "0", "conv1": "1", "snake2": "2", "conv2": "3"}


def checkpoint_file(path: Path) -> Path:
    return weights_file(path, ("model.safetensors", "model.pth", "*.pth"),
                        "X-Codec weights", "Boson's model.pth beside its config.json, or "
                        "model.safetensors beside a config.json")


def load_checkpoint(path: Path, config: XCodecConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], XCodecConfig]:
    """(canonical state dict, config) of any layout above; `config` overrides the file's."""
    d = read_json(path.with_name("config.json")) or {}
    if path.suffix == ".safetensors":
        sd = read_safetensors(path)
        if d.get("codec") == "xcodec":
            return sd, config or XCodecConfig.from_dict(d)
        if d.get("model_type") not in HF_TYPES:
            raise CheckpointError(f"{path}: X-Codec safetensors need their config.json "
                                  f"(model_type {' or '.join(HF_TYPES)}, or audiotok's)")
        sd = original_names(sd, _strides(d))
        try:
            config = config or XCodecConfig.from_hf(d)
        except ConfigError as e:
            raise CheckpointError(f"{path}: {e}") from None
        return canonical(sd, path), config
    obj = read_torch_object(path)
    raw = obj.get("codec_model", obj)  # (YuE's xcodec_mini_infer wraps it)
    raw = raw if isinstance(raw, Mapping) else {}
    sd = {k: v for k, v in raw.items() if isinstance(v, torch.Tensor)}
    if not any(k.startswith("encoder_semantic.") for k in sd) or \
            not any(k.startswith("decoder_2.") for k in sd):
        raise CheckpointError(f"{path}: not an X-Codec checkpoint (no encoder_semantic.* and "
                              "decoder_2.* tensors)")
    sd = canonical(sd, path)
    if config is None:
        soundstream = soundstream_config(path.parent)
        if not d and soundstream is None:
            raise CheckpointError(f"{path}: the .pth needs its config beside it (Boson's "
                                  "config.json, or X-Codec's SoundStream yaml)")
        try:
            config = XCodecConfig.from_boson(d, **widths(sd)) if d else \
                XCodecConfig.from_soundstream(soundstream, **widths(sd))
        except ConfigError as e:
            raise CheckpointError(f"{path}: {e}") from None
    return sd, config


def canonical(sd: Mapping[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """The original names (weight norm in any spelling) -> canonical: weight norm folded
    (HuBERT's positional convolution over its kernel axis), training-only tensors dropped, the
    codebooks stacked into quantizer.embed and their projections renamed."""
    sd = {k: v for k, v in sd.items() if not k.startswith(_TRAINING)}
    if not any(k.startswith("semantic_model.") for k in sd):
        raise CheckpointError(f"{path}: the checkpoint holds no semantic_model.* tensors (the "
                              "HuBERT its encoder runs)")
    sd = fold_weight_norm(fold_positional_conv(sd, "semantic_model."))
    out, books = {}, {}
    for k, v in sd.items():
        m = re.match(r"quantizer\.vq\.layers\.(\d+)\.(.*)", k)
        if m is None:
            out[k] = v
        elif m[2] == "_codebook.embed":
            books[int(m[1])] = v
        elif m[2].startswith(("project_in.", "project_out.")):
            part, rest = m[2].split(".", 1)
            out[f"quantizer.{part}.{m[1]}.{rest}"] = v
    if sorted(books) != list(range(len(books))) or not books:
        raise CheckpointError(f"{path}: codebooks quantizer.vq.layers.N._codebook.embed missing")
    out["quantizer.embed"] = torch.stack([books[i] for i in range(len(books))])
    return out


def widths(sd: Mapping[str, torch.Tensor]) -> dict:
    """What Boson's code fixes and its config.json leaves out, from canonical tensors."""
    try:
        hubert = HubertConfig(**HubertConfig.from_shapes(
            {k: list(v.shape) for k, v in sd.items()}, "semantic_model."))
        return {"encoder_dim": sd["encoder.block.0.weight"].shape[0],
                "decoder_dim": sd["decoder_2.model.0.weight"].shape[0], "hubert": hubert}
    except KeyError as e:
        raise CheckpointError(f"X-Codec weights without {e.args[0]}") from None


def _strides(d: dict) -> int:
    return len((d.get("acoustic_model_config") or {}).get("downsampling_ratios", (8, 5, 4, 2)))


def original_names(sd: Mapping[str, torch.Tensor], strides: int) -> dict[str, torch.Tensor]:
    """transformers' names -> the original code's (the inverse of its converters' mapping)."""
    out = {}
    for k, v in sd.items():
        n = k
        if m := re.match(r"acoustic_encoder\.(.*)", k):
            n = "encoder.block." + _dac_name(m[1], strides, encoder=True)
        elif m := re.match(r"acoustic_decoder\.(.*)", k):
            n = "decoder_2.model." + _dac_name(m[1], strides, encoder=False)
        elif k.startswith("quantizer.quantizers."):
            n = k.replace("quantizer.quantizers.", "quantizer.vq.layers.").replace(
                ".codebook.", "._codebook.")
        elif m := re.match(r"fc(\d?)\.(.*)", k):
            n = {"": "fc_prior.", "1": "fc_post1.", "2": "fc_post2."}[m[1]] + m[2]
        elif k.startswith(("encoder_semantic.", "decoder_semantic.")):
            n = re.sub(r"\.conv\.(weight|bias)$", r".conv.conv.\1", k)
            n = re.sub(r"\.conv1\.(weight|bias)$", r".conv1.conv.\1", n)
        out[n] = v
    return out


def _dac_name(rest: str, strides: int, encoder: bool) -> str:
    """transformers' DAC encoder/decoder names -> the dac package's (block.N / model.N)."""
    if m := re.match(r"(conv1|snake1|conv2)\.(.*)", rest):
        index = {"conv1": 0, "snake1": strides + 1, "conv2": strides + 2}[m[1]]
        return f"{index}.{m[2]}"
    m = re.match(r"block\.(\d+)\.(.*)", rest)
    if m is None:
        return rest
    i, inner = int(m[1]) + 1, m[2]
    if r := re.match(r"res_unit(\d)\.(snake1|conv1|snake2|conv2)\.(.*)", inner):
        unit = int(r[1]) - 1 + (0 if encoder else 2)
        return f"{i}.block.{unit}.block.{_UNIT[r[2]]}.{r[3]}"
    if encoder:
        part = {"snake1": "3", "conv1": "4"}
    else:
        part = {"snake1": "0", "conv_t1": "1"}
    r = re.match(r"(\w+)\.(.*)", inner)
    return f"{i}.block.{part[r[1]]}.{r[2]}"
