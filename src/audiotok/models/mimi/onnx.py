"""Mimi's ONNX graphs: the causal codec's step graphs and (OnnxSettings.offline_graphs) the
whole-input encoder and decoder (export/onnx.py), traced over lengths that span two attention
windows of the transformers. With padding="frame" the encoder graphs take whole frames (the
runtime zero-pads a last partial one); with padding="layer" any number of samples, each
convolution padding the end itself, as the torch codec does."""

from __future__ import annotations

from pathlib import Path

from ...errors import AudiotokError
from ...export.onnx import OnnxSettings, causal_graphs


def onnx_graphs(codec, tmp: Path, facts: dict, settings: OnnxSettings) -> dict:
    """max_push_frames: the most frames one step graph call takes; default and limit: the
    attention window in frames (125 for the released model)."""
    cfg = codec.config
    window = cfg.context // cfg.downsample_stride
    max_push = window if settings.max_push_frames is None else int(settings.max_push_frames)
    if not 1 <= max_push <= window:
        raise AudiotokError(f"max_push_frames must be 1..{window} (the attention window)")
    facts["padding"] = codec.padding
    return causal_graphs(codec, tmp, facts, 2 * window + 3, max_push, settings.offline_graphs,
                         raw_samples=codec.streaming.end_padding == "layers")
