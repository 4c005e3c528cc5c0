"""EnCodec checkpoints -> (canonical state dict, config).

Layouts, told apart by tensor names: the `encodec` package's state dicts (`encodec_24khz-
d7cc33bc.th`, `encodec_48khz-7e698e3e.th`: `encoder.model.N.conv.conv.weight_g/_v`,
`quantizer.vq.layers.i._codebook.embed` with its training buffers; no config, so the released
configuration whose shapes they have is used: 48 kHz when the convolutions carry GroupNorm,
32 kHz for 64 filters and codebooks of 2048, else 24 kHz); transformers'
`EncodecModel` (model.safetensors + config.json with `model_type: "encodec"`:
`encoder.layers.N.conv.weight_g/_v`, `quantizer.layers.i.codebook.embed`); and audiotok's own
save. The canonical layout is the package's names with weight norm folded and the codebooks
stacked in `quantizer.embed`.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ...checkpoint import fold_weight_norm, read_json, read_weights, weights_file
from ...errors import CheckpointError
from . import layout_of
from .config import ENCODEC_24KHZ, ENCODEC_32KHZ, ENCODEC_48KHZ, EncodecConfig

_EMBED = re.compile(r"^quantizer\.(?:vq\.layers|layers)\.(\d+)\.(?:_codebook|codebook)\.embed$")
_TRAINING = re.compile(r"\.(inited|cluster_size|embed_avg)$")


def checkpoint_file(path: Path) -> Path:
    """The weights file of a checkpoint path (a file, or a folder holding one)."""
    return weights_file(path, ("model.safetensors", "encodec_*.th"),
                        "EnCodec weights", "model.safetensors beside a config.json, or the "
                        "encodec package's encodec_*.th")


def load_checkpoint(path: Path, config: EncodecConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], EncodecConfig]:
    sd = read_weights(path)
    layout = layout_of(sd)
    if layout is None:
        raise CheckpointError(f"{path}: not an EnCodec checkpoint (neither the encodec "
                              "package's nor transformers' tensor names)")
    if config is None:
        meta = read_json(path.with_name("config.json")) or {}
        if meta.get("codec") == "encodec":
            config = EncodecConfig.from_dict(meta)
        elif meta.get("model_type") == "encodec":
            config = EncodecConfig.from_hf(meta)
        else:
            config = _released_config(sd)
    sd = {k: v for k, v in sd.items() if not _TRAINING.search(k)}
    sd = fold_weight_norm(sd)
    if layout == "hf":
        sd = _from_hf(sd)
    return _stack_codebooks(sd, config, str(path)), config


def _released_config(sd: dict[str, torch.Tensor]) -> EncodecConfig:
    """The released configuration a config-less state dict has the shapes of."""
    if any(k.endswith(".norm.weight") for k in sd):
        return ENCODEC_48KHZ
    first = next((v for k, v in sd.items() if re.match(r"^encoder\.(model|layers)\.0\..*"
                                                        r"weight(_v)?$", k)), None)
    books = [v for k, v in sd.items() if _EMBED.match(k)]
    wide = first is not None and first.shape[0] == ENCODEC_32KHZ.n_filters
    return ENCODEC_32KHZ if wide and books and books[0].shape[0] == ENCODEC_32KHZ.bins \
        else ENCODEC_24KHZ


def _from_hf(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' names -> the package's: `layers.` -> `model.`, and each convolution's
    wrapper put back (`conv.X` -> `conv.conv.X`, `norm.X` -> `conv.norm.X`; `convtr.` for the
    decoder's upsampling layers, told by their even kernel: 2 x stride, where every other
    kernel is odd)."""
    out = {}
    for key, value in sd.items():
        m = re.match(r"^(encoder|decoder)\.layers\.(\d+)\.((?:block\.\d+\.|shortcut\.)?)"
                     r"(conv|norm)\.(.*)$", key)
        if m is None:  # the LSTMs, the codebooks
            out[re.sub(r"^(encoder|decoder)\.layers\.", r"\1.model.", key)] = value
            continue
        side, index, inner, part, leaf = m.groups()
        weight = sd.get(f"{side}.layers.{index}.{inner}conv.weight")
        transposed = (side == "decoder" and not inner and weight is not None
                      and weight.shape[-1] % 2 == 0)
        wrapper = "convtr" if transposed else "conv"
        inside = wrapper if part == "conv" else "norm"
        out[f"{side}.model.{index}.{inner}{wrapper}.{inside}.{leaf}"] = value
    return out


def _stack_codebooks(sd: dict[str, torch.Tensor], config: EncodecConfig, source: str
                     ) -> dict[str, torch.Tensor]:
    books = {int(m.group(1)): v for k, v in sd.items() if (m := _EMBED.match(k))}
    if sorted(books) != list(range(config.n_q)):
        raise CheckpointError(f"{source}: expected {config.n_q} codebooks for bandwidths up to "
                              f"{config.target_bandwidths[-1]} kbit/s, found {len(books)}")
    out = {k: v for k, v in sd.items() if not _EMBED.match(k)}
    out["quantizer.embed"] = torch.stack([books[i].float() for i in range(config.n_q)])
    return out
