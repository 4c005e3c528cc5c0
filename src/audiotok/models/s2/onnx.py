"""S2's ONNX graphs: the causal codec's step graphs and (OnnxSettings.offline_graphs) the
whole-input encoder and decoder (export/onnx.py), traced over lengths that span two attention
windows of every transformer."""

from __future__ import annotations

from pathlib import Path

from ...errors import AudiotokError
from ...export.onnx import OnnxSettings, causal_graphs


def onnx_graphs(codec, tmp: Path, facts: dict, settings: OnnxSettings) -> dict:
    """max_push_frames: the most frames one step graph call takes; default and limit: what one
    step can attend over exactly, the smallest attention window in frames."""
    cfg = codec.config
    per_frame = codec.samples_per_frame // cfg.hop_length  # encoder-transformer positions/frame
    windows = (cfg.rvq_transformer.window_size, cfg.encoder_transformer_window // per_frame)
    limit = min(windows)
    max_push = limit if settings.max_push_frames is None else int(settings.max_push_frames)
    if not 1 <= max_push <= limit:
        raise AudiotokError(f"max_push_frames must be 1..{limit} (the attention window)")
    # example lengths spanning at least two attention windows of every transformer, so that
    # tracing sees the general case (a length of one window would be specialised)
    return causal_graphs(codec, tmp, facts, 2 * max(windows) + 3, max_push,
                         settings.offline_graphs)
