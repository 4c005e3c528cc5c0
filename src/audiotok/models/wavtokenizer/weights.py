"""WavTokenizer checkpoints -> (canonical state dict, config).

Three layouts: the reference's Lightning `.ckpt` (its `state_dict`: `feature_extractor.
encodec.encoder.*` with weight norm as `weight_g`/`weight_v`, the codebook at
`feature_extractor.encodec.quantizer.vq.layers.0._codebook.embed`, `backbone.*`, `head.*`, and
training-only tensors: the unused SEANet decoder, discriminators, loss modules); OuteTTS's
interface folder (`encoder/encoder_model.pt`: the feature extractor's state dict;
`decoder/decoder_model.pt`: `model_state_dict` with `backbone.*`, `head.*` and
`codebook_weights`, the same codebook); and audiotok's own save (model.safetensors +
config.json). The sizes come from the tensors (config.WavTokenizerConfig.from_state_dict), so
no yaml is needed.
"""

from __future__ import annotations

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
from ...errors import CheckpointError
from . import CODEBOOK, INTERFACE, reference_names
from .config import WavTokenizerConfig

ENCODER = "feature_extractor.encodec.encoder."


def checkpoint_file(path: Path) -> Path:
    """The file (or OuteTTS's interface folder) a checkpoint path stands for: a file, except
    OuteTTS's encoder file (the hub preset's first file), which stands for its folder."""
    path = Path(path)
    if path.is_file():
        folder = path.parent.parent
        if path.name == Path(INTERFACE[0]).name and (folder / INTERFACE[1]).is_file():
            return folder
        return path
    if all((path / f).is_file() for f in INTERFACE):
        return path
    return weights_file(path, ("model.safetensors", "*.ckpt"), "WavTokenizer weights",
                        "a .ckpt, OuteTTS's encoder/ and decoder/ folders, or model.safetensors "
                        "beside a config.json")


def load_checkpoint(path: Path, config: WavTokenizerConfig | None = None
                    ) -> tuple[dict[str, torch.Tensor], WavTokenizerConfig]:
    """(canonical state dict, config) of any layout above; `config` overrides the sizes read
    from the tensors (or an audiotok config.json)."""
    if path.is_dir():
        sd = _interface(path)
    elif path.suffix == ".safetensors":
        sd = read_safetensors(path)
        d = read_json(path.with_name("config.json")) or {}
        if config is None and d.get("codec") == "wavtokenizer":
            config = WavTokenizerConfig.from_dict(d)
    else:
        obj = read_torch_object(path)
        raw = obj.get("state_dict", obj)
        raw = {k: v for k, v in raw.items() if isinstance(v, torch.Tensor)}
        if not reference_names(raw):
            raise CheckpointError(f"{path}: not a WavTokenizer checkpoint (no "
                                  f"{CODEBOOK} or backbone.pos_net tensors)")
        sd = _from_reference(raw)
    sd = fold_weight_norm(sd)
    return sd, config or WavTokenizerConfig.from_state_dict(sd)


def _from_reference(raw: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The reference's names -> canonical (training-only tensors dropped)."""
    sd = {"encoder." + k[len(ENCODER):]: v for k, v in raw.items() if k.startswith(ENCODER)}
    sd.update({k: v for k, v in raw.items() if k.startswith("backbone.")})
    sd.update({"head.linear." + k[len("head.out."):]: v for k, v in raw.items()
               if k.startswith("head.out.")})
    sd["quantizer.embed"] = raw[CODEBOOK][None]
    return sd


def _interface(folder: Path) -> dict[str, torch.Tensor]:
    """OuteTTS's folder: the encoder's state dict and the decoder's; their codebooks must
    agree (the decoder's `codebook_weights` is the encoder's codebook)."""
    encoder = read_torch_object(folder / INTERFACE[0])
    decoder = read_torch_object(folder / INTERFACE[1])
    weights = decoder.get("model_state_dict", decoder)
    if CODEBOOK not in encoder or not any(k.startswith("backbone.") for k in weights):
        raise CheckpointError(f"{folder}: not OuteTTS's WavTokenizer folder ({INTERFACE[0]} "
                              f"needs {CODEBOOK}, {INTERFACE[1]} the backbone's tensors)")
    book = weights.get("codebook_weights", decoder.get("codebook_weights"))
    if book is not None and not torch.equal(book, encoder[CODEBOOK]):
        raise CheckpointError(f"{folder}: the decoder's codebook_weights differ from the "
                              "encoder's codebook")
    return _from_reference({**{k: v for k, v in weights.items()
                               if isinstance(v, torch.Tensor)},
                            **{k: v for k, v in encoder.items()
                               if isinstance(v, torch.Tensor)}})
