"""Token-to-audio checkpoints -> (`token2wav.*` state dict, Token2WavConfig).

Layouts: CosyVoice 2's `flow.pt` (the flow's state dict) and `hift.pt` (the vocoder's, weight
norm as parametrizations, an optional `generator.` prefix); Chatterbox's `s3gen.safetensors`
(`flow.*`, `mel2wav.*`, `speaker_encoder.*` beside the tokenizer); audiotok's own folders. Sizes
come from the tensors; the conventions (noise, excitation, fade-in) from the layout."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ....checkpoint import fold_weight_norm
from ....errors import CheckpointError
from .config import CHATTERBOX, COSYVOICE2, FlowConfig, Token2WavConfig

PREFIX = "token2wav."


def _count(sd: dict, prefix: str) -> int:
    return len({k[len(prefix):].split(".")[0] for k in sd if k.startswith(prefix)})


def flow_config(sd: dict, source: str) -> FlowConfig:
    """The flow's sizes from its tensors (unprefixed flow.pt names)."""
    try:
        unet = "decoder.estimator."
        inner = sd[f"{unet}down_blocks.0.1.0.attn1.to_q.weight"].shape[0]
        return FlowConfig(
            heads=sd["encoder.encoders.0.self_attn.pos_bias_u"].shape[0],
            linear_units=sd["encoder.encoders.0.feed_forward.w_1.weight"].shape[0],
            blocks=_count(sd, "encoder.encoders."), up_blocks=_count(sd, "encoder.up_encoders."),
            unet_channels=sd[f"{unet}final_proj.weight"].shape[1],
            unet_blocks=_count(sd, f"{unet}down_blocks.0.1."),
            unet_mid=_count(sd, f"{unet}mid_blocks."), unet_heads=inner // 64, unet_head_dim=64)
    except KeyError as e:
        raise CheckpointError(f"{source}: not a CosyVoice 2 flow (no {e.args[0]})") from None


def hift_state_dict(sd: dict) -> dict:
    """HiFT tensors with weight norm folded and Snake's alpha as [1, C, 1]."""
    sd = {k.removeprefix("generator."): v for k, v in sd.items()}
    return {k: v[None, :, None] if k.endswith(".alpha") and v.dim() == 1 else v
            for k, v in fold_weight_norm(sd).items()}


def combine(flow: dict, hift: dict, speaker: dict | None, like: Token2WavConfig, source: str
            ) -> tuple[dict, Token2WavConfig]:
    """The `token2wav.*` state dict and config of a flow, a vocoder and a speaker encoder."""
    hift = hift_state_dict(hift)
    if "conv_pre.weight" not in hift or "f0_predictor.classifier.weight" not in hift:
        raise CheckpointError(f"{source}: not a HiFT vocoder (no conv_pre / f0_predictor)")
    cfg = replace(like, flow=flow_config(flow, source),
                  hift=replace(like.hift, base_channels=hift["conv_pre.weight"].shape[0],
                               f0_channels=hift["f0_predictor.condnet.0.weight"].shape[0]),
                  speaker_encoder=speaker is not None)
    out = {f"{PREFIX}flow.{k}": v for k, v in flow.items()}
    out.update({f"{PREFIX}hift.{k}": v for k, v in hift.items()})
    for k, v in (speaker or {}).items():
        if not k.endswith("num_batches_tracked"):
            out[f"{PREFIX}speaker_encoder.{k}"] = v
    return out, cfg


def from_chatterbox(sd: dict, source: str) -> tuple[dict, Token2WavConfig] | None:
    """Chatterbox's s3gen tensors (`flow.*`, `mel2wav.*`, `speaker_encoder.*`), or None when the
    file holds no decoder audiotok runs (none, or Chatterbox-Turbo's mean-flow one: its
    tokenizer is read alone)."""
    if not any(k.startswith("flow.") for k in sd) or \
            "flow.decoder.estimator.time_embed_mixer.weight" in sd:
        return None

    def part(prefix):
        return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}

    speaker = part("speaker_encoder.") or None
    return combine(part("flow."), part("mel2wav."), speaker, CHATTERBOX, source)


def from_cosyvoice(folder: Path) -> tuple[dict, Token2WavConfig] | None:
    """CosyVoice 2's flow.pt and hift.pt beside the tokenizer, or None when they are absent;
    its campplus.onnx, when there, makes voices (on onnxruntime, as CosyVoice's front end)."""
    flow, hift = folder / "flow.pt", folder / "hift.pt"
    if not (flow.is_file() and hift.is_file()):
        return None
    try:
        f = torch.load(flow, map_location="cpu", weights_only=True)
        h = torch.load(hift, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 (any unreadable pickle)
        raise CheckpointError(f"{folder}: unreadable flow.pt / hift.pt ({e})") from None
    sd, cfg = combine(f, h, None, COSYVOICE2, str(folder))
    speaker = folder / "campplus.onnx"
    return sd, replace(cfg, speaker_onnx=str(speaker)) if speaker.is_file() else cfg
