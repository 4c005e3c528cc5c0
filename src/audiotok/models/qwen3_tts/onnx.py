"""The Qwen3-TTS tokenizer's ONNX graphs (export/onnx.py's causal codec graphs). The encoder
graphs take any number of samples: their convolutions pad a last partial frame as the
reference's MimiModel does, so the runtime feeds each item as it is (items of one length as a
batch) and a stream's last partial frame as it is. The encoder step graph exists with
attention="window" only (full attention keeps every past step); then the decoder's step graph
and (OnnxSettings.offline_graphs) the whole-input decoder."""

from __future__ import annotations

from pathlib import Path

from ...errors import AudiotokError
from ...export.onnx import OnnxSettings, causal_graphs


def onnx_graphs(codec, tmp: Path, facts: dict, settings: OnnxSettings) -> dict:
    """max_push_frames: the most frames one step graph call takes; default and limit: the
    decoder's attention window (72 frames)."""
    window = codec.config.decoder.sliding_window
    max_push = window if settings.max_push_frames is None else int(settings.max_push_frames)
    if not 1 <= max_push <= window:
        raise AudiotokError(f"max_push_frames must be 1..{window} (the decoder's attention "
                            "window)")
    facts["attention"] = codec.attention
    extra = causal_graphs(codec, tmp, facts, 2 * window + 3, max_push, settings.offline_graphs,
                          raw_samples=True)
    if codec.stream_refusal("encode"):
        extra["no_step_graph"] = {
            "encoder_step": "its encoder attends over every past step (attention=full); "
                            "`audiotok export 'MODEL?attention=window' --format onnx ...` "
                            "exports one"}
    return extra
