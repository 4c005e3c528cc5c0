"""Every supported S2 checkpoint -> (canonical state dict, config).

Canonical means the folded tensor names of the reference model (`...conv.weight`, no weight-norm
pairs, no RoPE/mask buffers), float32 or the file's float dtype. Supported:
- fish-speech `codec.pth` (parametrizations or legacy weight norm, or folded; optionally wrapped as
  `{"state_dict": {"generator.<key>": ...}}`);
- s2.cpp GGUF, merged (`fish-speech`, codec under `c.`) or standalone (`fish-speech-codec`);
- our own directory: config.json + model.safetensors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ...checkpoint import fold_weight_norm, read_json, read_safetensors, read_torch
from ...errors import CheckpointError, ConfigError
from . import FAMILY
from .config import S2_PRO, RVQTransformerConfig, S2Config

_STALE_BUFFERS = ("freqs_cis", "causal_mask")


def checkpoint_file(path: Path) -> Path:
    """The checkpoint file a path stands for: the path itself, or the one in a directory."""
    path = Path(path)
    if not path.is_dir():
        return path
    for name in ("model.safetensors", "codec.pth", "codec.ckpt"):
        if (path / name).exists():
            return path / name
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    raise CheckpointError(f"{path}: no S2 codec checkpoint in this directory (looked for "
                          "model.safetensors + config.json, codec.pth, or one .gguf file)")


def load_checkpoint(path: Path, config: S2Config | None = None) -> tuple[dict, S2Config]:
    """Read any supported S2 checkpoint. `config` overrides the one found in or beside the file."""
    path = checkpoint_file(path)
    if path.suffix == ".gguf":
        sd, file_config = read_gguf(path)
        return sd, config or file_config
    if path.suffix == ".safetensors":
        config = config or sibling_config(path)
        if config is None:
            raise CheckpointError(f"{path}: safetensors weights without an S2 config.json "
                                  "beside them")
        return read_safetensors(path), config
    sd = canonical_torch_state_dict(read_torch(path))
    return sd, config or sibling_config(path) or infer_config(sd, str(path))


def sibling_config(path: Path) -> S2Config | None:
    """The S2 codec config.json next to a checkpoint, if there is one (a config.json of another
    model, such as the S2 Pro language model's, is ignored)."""
    p = path.parent / "config.json"
    d = read_json(p)
    if d is None or "encoder_rates" not in d:
        return None
    if d.get("codec", FAMILY.name) != FAMILY.name:
        raise ConfigError(f"{p}: config of codec {d.get('codec')!r}, not of the S2 codec")
    return S2Config.from_dict(d)


def canonical_torch_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Strip a training wrapper's `generator.` prefix, drop stale buffers, fold weight norm."""
    if any("generator." in k for k in sd):
        sd = {k.split("generator.", 1)[1]: v for k, v in sd.items() if "generator." in k}
    sd = {k: v for k, v in sd.items() if k.rsplit(".", 1)[-1] not in _STALE_BUFFERS}
    return fold_weight_norm(sd)


def to_fish_speech(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The canonical state dict in the released `codec.pth` layout, which fish-speech loads:
    causal convs as `parametrizations.weight.original0/1`, VQ projections as legacy
    `weight_g/weight_v` (g = ||W|| over all axes but 0, v = W)."""
    out = {}
    for key, w in sd.items():
        base = key[: -len(".weight")]
        if _is_weight_normed(key):
            g = torch.linalg.vector_norm(w.flatten(1), dim=1).view(-1, *[1] * (w.dim() - 1))
            if base.endswith("_proj"):
                out[base + ".weight_g"], out[base + ".weight_v"] = g, w
            else:
                out[base + ".parametrizations.weight.original0"] = g
                out[base + ".parametrizations.weight.original1"] = w
        else:
            out[key] = w
    return out


def _is_weight_normed(key: str) -> bool:
    if not key.endswith(".weight"):
        return False
    if key.startswith("quantizer."):
        return key.endswith(("in_proj.weight", "out_proj.weight"))
    return key.endswith(".conv.weight")  # every encoder/decoder conv


def _count(sd: dict, pattern: str) -> int:
    """How many of pattern.format(0), pattern.format(1), ... are keys of sd, in a row."""
    return _count_from(sd, pattern, 0)


def _count_from(sd: dict, pattern: str, start: int) -> int:
    n = start
    while pattern.format(n) in sd:
        n += 1
    return n - start


def infer_config(sd: dict[str, torch.Tensor], source: str, base: S2Config = S2_PRO) -> S2Config:
    """Config from tensor shapes; what shapes cannot tell (attention windows, head size, RoPE
    base, norm eps) comes from `base` (S2 Pro's values)."""
    try:
        n_enc = _count_from(sd, "encoder.block.{}.block.4.conv.weight", 1)
        enc_rates = tuple(sd[f"encoder.block.{i}.block.4.conv.weight"].shape[-1] // 2
                          for i in range(1, n_enc + 1))
        layer = "encoder.block.{}.block.5.layers.{{}}.attention.wqkv.weight"
        enc_layers = tuple(_count(sd, layer.format(i)) for i in range(1, n_enc + 1))
        n_dec = _count_from(sd, "decoder.model.{}.block.1.conv.weight", 1)
        dec_rates = tuple(sd[f"decoder.model.{i}.block.1.conv.weight"].shape[-1] // 2
                          for i in range(1, n_dec + 1))
        sem = "quantizer.semantic_quantizer.quantizers.0."
        head_dim = base.rvq_transformer.head_dim
        wqkv = sd["quantizer.pre_module.layers.0.attention.wqkv.weight"]
        rvq = RVQTransformerConfig(
            n_layer=_count(sd, "quantizer.pre_module.layers.{}.attention.wqkv.weight"),
            n_head=wqkv.shape[0] // (3 * head_dim),
            dim=sd["quantizer.pre_module.norm.weight"].shape[0],
            intermediate_size=sd["quantizer.pre_module.layers.0.feed_forward.w1.weight"].shape[0],
            head_dim=head_dim,
            window_size=base.rvq_transformer.window_size,
            rope_base=base.rvq_transformer.rope_base,
            norm_eps=base.rvq_transformer.norm_eps,
        )
        return S2Config(
            sample_rate=base.sample_rate,
            encoder_dim=sd["encoder.block.0.conv.weight"].shape[0],
            encoder_rates=enc_rates,
            latent_dim=sd[f"encoder.block.{n_enc + 2}.conv.weight"].shape[0],
            decoder_dim=sd["decoder.model.0.conv.weight"].shape[0],
            decoder_rates=dec_rates,
            encoder_transformer_layers=enc_layers,
            encoder_transformer_window=base.encoder_transformer_window,
            transformer_head_dim=base.transformer_head_dim,
            rope_base=base.rope_base,
            norm_eps=base.norm_eps,
            quantizer_input_dim=sd[sem + "out_proj.weight"].shape[0],
            residual_codebooks=_count(sd, "quantizer.quantizer.quantizers.{}.codebook.weight"),
            residual_codebook_size=sd["quantizer.quantizer.quantizers.0.codebook.weight"].shape[0],
            codebook_dim=sd[sem + "codebook.weight"].shape[1],
            semantic_codebook_size=sd[sem + "codebook.weight"].shape[0],
            quantizer_downsample_factor=tuple(
                sd[f"quantizer.downsample.{i}.0.conv.weight"].shape[-1]
                for i in range(_count(sd, "quantizer.downsample.{}.0.conv.weight"))),
            rvq_transformer=rvq,
        )
    except KeyError as e:
        raise CheckpointError(f"{source}: not an S2 codec checkpoint (missing tensor "
                              f"{e.args[0]})") from None
    except ConfigError as e:
        raise CheckpointError(f"{source}: inconsistent S2 codec checkpoint ({e})") from None


# --- GGUF (s2.cpp) --------------------------------------------------------------------------

_ARCH_PREFIX = {"fish-speech": "c.", "fish-speech-codec": ""}
_KEY = "fish_speech.codec."


def read_gguf(path: Path) -> tuple[dict[str, torch.Tensor], S2Config]:
    """Codec tensors and config of an s2.cpp GGUF file. Tensors of the language model in a merged
    file are never read (the file is memory-mapped)."""
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # the reader raises ValueError, struct errors, memmap errors...
        raise CheckpointError(f"{path}: cannot read GGUF file ({e}); the file is truncated, "
                              "corrupt or not GGUF") from None
    meta = _GGUFMeta(reader, path)
    arch = meta.get("general.architecture", "str")
    if arch not in _ARCH_PREFIX:
        raise CheckpointError(f"{path}: GGUF architecture {arch!r} is not an S2 codec file "
                              f"(expected one of {sorted(_ARCH_PREFIX)})")
    prefix = _ARCH_PREFIX[arch]
    sd = {}
    for t in reader.tensors:
        if not t.name.startswith(prefix):
            continue
        name = t.name[len(prefix):]
        if name.rsplit(".", 1)[-1] in _STALE_BUFFERS:
            continue
        if t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            raise CheckpointError(f"{path}: tensor {t.name} has type {t.tensor_type.name}; only "
                                  "F32 and F16 codec tensors are supported")
        sd[name] = torch.from_numpy(np.array(t.data))
    return sd, _gguf_config(meta, sd, path)


class _GGUFMeta:
    """Typed access to GGUF metadata; every failure names the key."""

    _TYPES = {"u32": ("UINT32",), "i32": ("INT32", "UINT32"), "f32": ("FLOAT32",),
              "str": ("STRING",), "ints": ("INT32", "UINT32", "UINT64", "INT64")}

    def __init__(self, reader, path: Path):
        self.fields = reader.fields
        self.path = path

    def get(self, key: str, kind: str, default=None, required: bool = True):
        import gguf

        field = self.fields.get(key)
        if field is None:
            if required:
                raise CheckpointError(f"{self.path}: GGUF metadata key {key} is missing")
            return default
        types = [gguf.GGUFValueType(t).name for t in field.types]
        if kind == "ints":
            ok = types[0] == "ARRAY" and len(types) > 1 and types[1] in self._TYPES["ints"]
            expected = "ARRAY of integers"
        else:
            ok = types[0] in self._TYPES[kind]
            expected = " or ".join(self._TYPES[kind])
        if not ok:
            raise CheckpointError(f"{self.path}: GGUF metadata key {key} has type "
                                  f"{'/'.join(types)}, expected {expected}")
        if kind == "ints":
            return tuple(int(field.parts[i][0]) for i in field.data)
        part = field.parts[field.data[0]]
        if kind == "str":
            return bytes(part).decode("utf-8")
        if kind == "f32":
            return float(str(np.float32(part[0])))  # shortest decimal: 1e-05, not 9.99e-06
        return int(part[0])


def _gguf_config(meta: _GGUFMeta, sd: dict, path: Path) -> S2Config:
    k = _KEY
    rvq_dim = meta.get(k + "rvq_transformer.dim", "u32")
    rvq_head_dim = meta.get(k + "rvq_transformer.head_dim", "u32")
    ffn = meta.get(k + "rvq_transformer.feed_forward_length", "u32", required=False)
    if ffn is None:
        w1 = sd.get("quantizer.pre_module.layers.0.feed_forward.w1.weight")
        ffn = w1.shape[0] if w1 is not None else 3 * rvq_dim
    meta.get(k + "transformer.n_local_heads", "i32")
    # s2.cpp pads encode input to frame_length (512); fish-speech, and we, pad to a whole frame
    meta.get(k + "frame_length", "u32", required=False)
    rvq_local = meta.get(k + "rvq_transformer.n_local_heads", "i32")
    if rvq_local > 2**31:
        rvq_local -= 2**32
    try:
        cfg = S2Config(
            sample_rate=meta.get(k + "sample_rate", "u32"),
            encoder_dim=meta.get(k + "encoder_dim", "u32"),
            encoder_rates=meta.get(k + "encoder_rates", "ints"),
            latent_dim=meta.get(k + "latent_dim", "u32"),
            decoder_dim=meta.get(k + "decoder_dim", "u32"),
            decoder_rates=meta.get(k + "decoder_rates", "ints"),
            encoder_transformer_layers=meta.get(k + "encoder_transformer_layers", "ints"),
            transformer_head_dim=meta.get(k + "transformer.head_dim", "u32"),
            rope_base=meta.get(k + "transformer.rope_freq_base", "f32"),
            norm_eps=meta.get(k + "transformer.layer_norm_rms_eps", "f32"),
            quantizer_input_dim=meta.get(k + "quantizer_input_dim", "u32"),
            residual_codebooks=meta.get(k + "quantizer_residual_codebooks", "u32"),
            residual_codebook_size=meta.get(k + "quantizer_residual_codebook_size", "u32"),
            codebook_dim=meta.get(k + "quantizer_codebook_dim", "u32"),
            semantic_codebook_size=meta.get(k + "quantizer_semantic_codebook_size", "u32"),
            quantizer_downsample_factor=meta.get(k + "quantizer_downsample_factor", "ints"),
            rvq_transformer=RVQTransformerConfig(
                n_layer=meta.get(k + "rvq_transformer.n_layer", "u32"),
                n_head=rvq_dim // rvq_head_dim,
                dim=rvq_dim,
                intermediate_size=ffn,
                head_dim=rvq_head_dim,
                n_local_heads=rvq_local,
                window_size=meta.get(k + "rvq_transformer.window_size", "u32"),
                rope_base=meta.get(k + "rvq_transformer.rope_freq_base", "f32"),
                norm_eps=meta.get(k + "rvq_transformer.layer_norm_rms_eps", "f32"),
            ),
        )
    except ConfigError as e:
        raise CheckpointError(f"{path}: inconsistent GGUF metadata ({e})") from None
    hop = meta.get(k + "hop_length", "u32")
    if hop != cfg.hop_length:
        raise CheckpointError(f"{path}: GGUF metadata key {k}hop_length = {hop} does not match "
                              f"the encoder rates {cfg.encoder_rates} (hop {cfg.hop_length})")
    return cfg
