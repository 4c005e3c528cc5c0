"""NanoCodec's ONNX graphs (export/onnx.causal_graphs): the causal decoder's step graph
(`decoder_step`: codes in, their audio out, every layer's state carried by the runtime) and,
with OnnxSettings.offline_graphs, the whole-input decoder; the encoder, which is not causal,
as a whole-input graph only (audio [B, 1, N], N whole frames; the runtime zero-pads each item
to whole frames and runs each padded length as its own batch)."""

from __future__ import annotations

from pathlib import Path

from ...errors import AudiotokError
from ...export.onnx import OnnxSettings, causal_graphs

MAX_PUSH = 64  # the default and the limit of frames one decoder_step call takes


def onnx_graphs(codec, tmp: Path, facts: dict, settings: OnnxSettings) -> dict:
    max_push = MAX_PUSH if settings.max_push_frames is None else int(settings.max_push_frames)
    if not 1 <= max_push <= MAX_PUSH:
        raise AudiotokError(f"max_push_frames must be 1..{MAX_PUSH}")
    facts["no_step_graph"] = {"encoder_step": "its encoder is not causal (it reads about 1.1 s "
                                              "ahead)"}
    return causal_graphs(codec, tmp, facts, 9, max_push, settings.offline_graphs,
                         encoder_step=False)
