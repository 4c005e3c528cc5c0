"""EnCodec 48 kHz (stereo, in 1 s segments) for compare.py: each implementation's codes as one
tensor [1, K, T + S] (the tokens of all segments, then each segment's scale on every row), so
that codes and scales are checked equal together."""

from __future__ import annotations

import torch
from references import Impl

import audiotok
from audiotok.models.encodec import segments


class Stereo:
    """Speech on both channels (the left delayed by 7 ms); `prepare` sets the segment layout
    that the decoders of the same input use."""

    def __init__(self, config):
        self.config = config
        self.layout: list[int] = []

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        self.layout = segments.frames_of(self.config, x.shape[-1])
        return torch.cat([torch.roll(x, 336, -1), x], 1)

    def ours(self, codec) -> Impl:
        def encode(x):
            codes = codec.encode(x[0], codec.input_rate)
            return joined(codes.tokens, codes.scales)

        def decode(c):
            tokens, scales = self.split(c)
            return codec.decode(audiotok.Codes(tokens, torch.tensor([tokens.shape[-1]]),
                                               scales=scales))

        return Impl(encode, decode)

    def package(self, model) -> Impl:
        """The encodec package's encode (a list of (codes, scale) frames) and decode."""
        def encode(x):
            frames = model.encode(x)
            return joined(torch.cat([f[0] for f in frames], -1),
                          torch.stack([f[1].view(-1) for f in frames], 1))

        return Impl(encode, lambda c: model.decode(self.frames(c)))

    def transformers(self, model, bandwidth: float) -> Impl:
        def encode(x):
            out = model.encode(x, bandwidth=bandwidth)
            last = len(out.audio_codes) - 1
            codes = torch.cat([c[..., : 150 - (out.last_frame_pad_length if i == last else 0)]
                               for i, c in enumerate(out.audio_codes)], -1)
            return joined(codes, torch.cat(list(out.audio_scales), 1))

        def decode(c):
            frames = self.frames(c)
            codes = torch.stack([torch.nn.functional.pad(t, (0, 150 - t.shape[-1]))
                                 for t, _ in frames])
            return model.decode(codes, [s for _, s in frames],
                                last_frame_pad_length=150 - self.layout[-1]).audio_values

        return Impl(encode, decode)

    def split(self, c):
        """(tokens [1, K, T], scales [1, S]) of a joined tensor."""
        frames = sum(self.layout)
        return c[:, :, :frames].long(), c[:, 0, frames:]

    def frames(self, c):
        """The package's encoded frames: (codes [1, K, T_s], scale [1, 1]) per segment."""
        tokens, scales = self.split(c)
        starts = [sum(self.layout[:i]) for i in range(len(self.layout))]
        return [(tokens[..., a : a + n], scales[:, i : i + 1])
                for i, (a, n) in enumerate(zip(starts, self.layout, strict=True))]


def joined(tokens, scales):
    """tokens [1, K, T] and scales [1, S] as one tensor [1, K, T + S]."""
    return torch.cat([tokens.float(), scales[:, None].expand(-1, tokens.shape[1], -1)], -1)
