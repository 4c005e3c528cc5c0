"""SNAC's decoder as a stateful stream (nn/stream_steps.py): every frame decoded once, the audio
out as soon as it is determined, equal to the offline decode. SNAC's own layers:

- the noise blocks draw the seeded noise at each sample's absolute position;
- local attention (32/44 kHz) waits for whole windows; the end of a stream is padded to whole
  windows with copies of the last frame, as the offline decode pads it.

Audio comes out 4757 samples (2.3 frames at 24 kHz) behind the codes (the decoder's reach), as
the samples become final rather than in whole frames; work per frame is one frame's decode.
"""

from __future__ import annotations

import torch

from ...nn.stream_steps import Chain, DecoderStream, Step, build, cat
from .model import DecoderBlock, LocalMHA, NoiseBlock, SnacModel, rows_to_levels

__all__ = ["DecoderStream", "decoder_stream"]


class _Noise(Step):
    """x + n * conv1x1(x), n the model's noise at each step's absolute position."""

    STATE = ("position",)

    def __init__(self, block: NoiseBlock, model: SnacModel, index: int):
        self.block, self.model, self.index = block, model, index
        self.position: torch.Tensor | None = None  # [B] steps so far, per row

    def push(self, x):
        if self.position is None:
            self.position = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        positions = self.position[:, None] + torch.arange(x.shape[-1], device=x.device)
        self.position = self.position + x.shape[-1]
        return self.block(x, self.model.noise_at(self.index, positions, x))


class _Windows(Step):
    """Local attention over whole windows (the stream's end is padded to whole windows)."""

    STATE = ("held",)

    def __init__(self, attention: LocalMHA):
        self.attention, self.held = attention, None

    def push(self, x):
        self.held = cat(self.held, x)
        whole = self.held.shape[-1] // self.attention.window * self.attention.window
        if whole == 0:
            return None
        ready, self.held = self.held[..., :whole], self.held[..., whole:]
        return self.attention(ready)

    def flush(self):
        if self.held is not None and self.held.shape[-1]:
            raise RuntimeError("a stream ended inside an attention window")
        return None


def decoder_stream(model: SnacModel, align: int) -> DecoderStream:
    """A stream of the model's decoder; the end padded to multiples of `align` frames."""
    blocks = [0]

    def custom(module) -> Step | None:
        if isinstance(module, NoiseBlock):
            blocks[0] += 1
            return _Noise(module, model, blocks[0] - 1)
        if isinstance(module, LocalMHA):
            return _Windows(module)
        if isinstance(module, DecoderBlock):
            return Chain([build(m, custom) for m in module.block])
        return None

    cfg = model.config
    return DecoderStream(build(model.decoder.model, custom),
                         lambda tokens: model.quantizer.decode(rows_to_levels(tokens, cfg)),
                         lambda frames: frames * cfg.samples_per_frame, align)
