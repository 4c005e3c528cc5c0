"""S3 tokenizer checkpoints -> (canonical state dict, config).

Layouts: the official ONNX files (official.py); audiotok's own folder (config.json naming the
codec, model.safetensors);
s3tokenizer's converted state dicts (`.pt`, the names of its `init_from_pt`); Chatterbox's
`s3gen.safetensors` / `s3gen_meanflow.safetensors`, whose tensors under `tokenizer.` are a v2
tokenizer (its `_mel_filters` and `window` buffers are the standard front end's and are
dropped). The canonical names are s3tokenizer's (models/s3/model.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ...checkpoint import read_json, read_weights, weights_file
from ...errors import CheckpointError
from .config import VARIANTS, S3Config

_FILES = ("model.safetensors", "speech_tokenizer*.onnx", "*.pt", "s3gen*.safetensors")
CHATTERBOX = "tokenizer."
_CHATTERBOX_EXTRA = ("tokenizer._mel_filters", "tokenizer.window")


def checkpoint_file(path: Path) -> Path:
    """The weights file of a checkpoint path (a file, or a folder holding one)."""
    return weights_file(path, _FILES, "S3 tokenizer weights",
                        "an official speech_tokenizer_*.onnx, model.safetensors, an "
                        "s3tokenizer .pt state dict or Chatterbox's s3gen.safetensors")


def load_checkpoint(path: Path, config: S3Config | None = None, variant: str | None = None
                    ) -> tuple[dict[str, torch.Tensor], S3Config]:
    """(state dict, config) of an S3 weights file. `variant` ("v1", "v1_25hz", "v2_25hz",
    "v3_25hz") is needed for a v1 state dict without a config.json: the 50 Hz and 25 Hz v1
    tensors have the same names and shapes (only the first convolution's stride differs)."""
    if path.suffix.lower() == ".onnx":
        from .official import read_onnx
        from .token2wav.weights import from_cosyvoice

        sd, found = read_onnx(path, variant if config is None else config.variant)
        return _with_decoder(sd, config or found, from_cosyvoice(path.parent), str(path))
    sd = read_weights(path)
    if any(k.startswith(CHATTERBOX + "encoder.") for k in sd):
        from .token2wav.weights import from_chatterbox

        decoder = from_chatterbox(sd, str(path))
        sd = {k[len(CHATTERBOX):]: v for k, v in sd.items()
              if k.startswith(CHATTERBOX) and k not in _CHATTERBOX_EXTRA}
        return _with_decoder(sd, config or config_of(sd, variant, str(path)), decoder, str(path))
    if "encoder.conv1.weight" not in sd:
        raise CheckpointError(f"{path}: not an S3 tokenizer checkpoint (no encoder.conv1.weight)")
    if config is None:
        meta = read_json(path.with_name("config.json")) or {}
        config = S3Config.from_dict(meta) if meta.get("codec") == "s3" else \
            config_of(sd, variant, str(path))
    elif variant is not None and variant != config.variant:
        raise CheckpointError(f"{path}: its config says variant {config.variant!r}, not "
                              f"{variant!r}")
    return sd, config


def config_of(sd: dict[str, torch.Tensor], variant: str | None, source: str) -> S3Config:
    """The configuration a state dict's tensors imply (v1's rate from `variant`)."""
    width = sd["encoder.conv1.weight"].shape[0]
    layers = len({k.split(".")[2] for k in sd if k.startswith("encoder.blocks.")})
    vq = "quantizer._codebook.embed" in sd
    if variant is None:
        if vq:
            raise CheckpointError(
                f"{source}: a v1 S3 tokenizer's weights do not say its rate: load it with "
                "variant='v1' (50 Hz, CosyVoice-300M) or variant='v1_25hz' (CosyVoice-300M-25Hz, "
                "Step-Audio)")
        variant = "v3_25hz" if layers == 12 else "v2_25hz"
    if variant not in VARIANTS:
        raise CheckpointError(f"unknown S3 variant {variant!r}; one of {', '.join(VARIANTS)}")
    if VARIANTS[variant].vq != vq:
        raise CheckpointError(f"{source}: these weights are a {'VQ (v1)' if vq else 'FSQ (v2/v3)'}"
                              f" tokenizer, not {variant}")
    return S3Config(variant, width=width, heads=width // 64, layers=layers)


def _with_decoder(sd: dict, config: S3Config, decoder, source: str
                  ) -> tuple[dict[str, torch.Tensor], S3Config]:
    """The tokenizer's tensors and config with a token-to-audio decoder's, if one was found."""
    if decoder is None:
        return sd, config
    if config.variant != "v2_25hz":
        raise CheckpointError(f"{source}: a token-to-audio decoder decodes v2 tokens, but the "
                              f"tokenizer beside it is {config.variant}")
    tensors, t2w = decoder
    return {**sd, **tensors}, replace(config, token2wav=t2w)
