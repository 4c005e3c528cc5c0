"""The encoder of a non-causal EnCodec (MusicGen's 32 kHz model) over long audio in overlapping
windows: its convolutions (up to the LSTM) run window by window, each window's audio widened on
both sides by the convolutions' reach and its edge frames dropped, then the LSTM and the layers
after it run on the whole. A window's activations stay in the caches from layer to layer, where
one pass streams every layer's input and output through memory.

Windows start at multiples of the hop, so each layer's frames line up with the one pass's, and
every layer pads the audio's real ends (reflection and the extra padding of a strided layer) as
the one pass does: the kept frames are the one pass's sums over the same values (see
docs/codecs/encodec.md for how far oneDNN's kernels keep them bit for bit).
"""

from __future__ import annotations

import torch

from .model import SLSTM, EncodecModel, SConv1d


def reach(layers) -> int:
    """Input samples each side that an output frame of `layers` (convolutions and pointwise
    layers, no LSTM) reads: the receptive field, an upper bound for either side."""
    field, jump = 1, 1
    for m in layers.modules():
        if isinstance(m, SConv1d):
            field += (m.kernel - 1) * jump
            jump *= m.stride
    return field


def latents_in_windows(model: EncodecModel, audio: torch.Tensor, window: int) -> torch.Tensor:
    """model.encoder(audio) [B, D, T] for audio [B, C, N], `window` samples (a multiple of the
    hop) of frames a call."""
    hop = model.config.hop_length
    layers = model.encoder.model
    split = next(i for i, m in enumerate(layers) if isinstance(m, SLSTM))
    head = layers[:split]
    margin = -(-reach(head) // hop) * hop
    audio = audio.to(model.dtype)
    n = audio.shape[-1]
    # the last window takes the rest (1 to 2 windows): no short call, whose kernels may sum
    # another way
    starts = [*range(0, max(n - window, 1), window)]
    ends = [*starts[1:], n]
    out = []
    for start, end in zip(starts, ends, strict=True):
        lo, hi = max(start - margin, 0), min(end + margin, n)
        y = head(audio[..., lo:hi])
        skip = (start - lo) // hop
        out.append(y[..., skip : skip + -(-(end - start) // hop)])
    return layers[split:](torch.cat(out, -1))
