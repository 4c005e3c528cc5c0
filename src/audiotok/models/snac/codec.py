"""SnacCodec: SNAC behind the common Codec API."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ...audio import AudioItem
from ...checkpoint import build_model
from ...codec import Codec, _as_token_tensor, by_length
from ...codes import Codes
from ...errors import AudiotokError, CodesError
from ...streaming.spec import STEPS, StreamSpec, Window
from . import FAMILY
from .config import SnacConfig, decode_context
from .model import SnacModel, levels_to_rows, rows_to_levels
from .noise import NOISE_MODES
from .weights import checkpoint_file, load_checkpoint


class SnacCodec(Codec):
    """SNAC: mono audio <-> 3 (24 kHz) or 4 (32/44 kHz) levels of 4096 codes, one token row per
    code of a coarse frame (7 or 15 rows; see model.py for their order).

    noise: "seeded" (default), "torch" or "off" (noise.py); seed: the seeded noise's seed.
    Inputs are zero-padded as the reference pads them: to whole coarse frames (24 kHz), or to
    whole attention windows of 4 coarse frames (32/44 kHz). Not causal: a padded batch is
    encoded and decoded per length, so every item gets what it gets alone. Streams run the
    decoder statefully (step_stream), or in windows with enough context to equal the offline
    decode (the spec's window, from the configuration's reach)."""

    family = FAMILY
    # decoded as steps, or in exact windows (left, chunk, lookahead: 24 kHz's here; per
    # configuration in __init__); no encode stream
    streaming = StreamSpec(decode=STEPS, window=Window(3, 4, 3, exact=True))

    def __init__(self, model: SnacModel, *, noise: str = "seeded", seed: int = 0, **kw):
        super().__init__(model, model.config, **kw)
        if noise not in NOISE_MODES:
            raise AudiotokError(f"noise must be one of {', '.join(NOISE_MODES)}, got {noise!r}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise AudiotokError(f"seed must be an integer, got {seed!r}")
        cfg = model.config
        self.model.noise, self.model.seed = noise, seed
        self.sample_rate = cfg.sampling_rate
        self.samples_per_frame = cfg.samples_per_frame
        self.num_codebooks = cfg.num_codebooks
        self.codebook_sizes = (cfg.codebook_size,) * cfg.num_codebooks
        align = cfg.pad_frames  # frames of an attention window (or 1)
        if align > 1:
            self.frame_rule = f"ceil:{align}"
        left, right = decode_context(cfg)  # 24 kHz: 3, 3; 32/44 kHz: 8, 8
        # windows start on attention windows; a chunk of 4 frames or more
        self.streaming = replace(self.streaming, window=Window(
            left, -(-4 // align) * align, right, align, exact=True))

    @classmethod
    def from_checkpoint(cls, path: Path, config: SnacConfig | None = None, **kw) -> SnacCodec:
        path = checkpoint_file(path)
        state_dict, config = load_checkpoint(path, config)
        model = build_model(SnacModel, config, state_dict, str(path))
        return cls(model, source=str(path), **kw)

    def step_stream(self, direction: str):
        """The decoder's stream (models/snac/stream.py): every frame decoded once, audio out as
        soon as it is final, 4757 samples (2.3 frames) behind the codes at 24 kHz."""
        from .stream import decoder_stream

        return decoder_stream(self.model, self.streaming.window.align)

    @property
    def noise(self) -> str:
        return self.model.noise

    def info(self) -> dict:
        return {**super().info(), "noise": self.model.noise, "seed": self.model.seed,
                "levels": len(self.config.vq_strides)}

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Items of one padded length run as a batch (the same codes as alone); each length
        on its own (padding more than its own would change a non-causal item's codes)."""
        spf = self.samples_per_frame
        return self._encode_by_length(items, [self.num_frames(it.samples.numel()) * spf
                                              for it in items])

    # -- the reference's per-level form --------------------------------------------------------
    def to_levels(self, codes) -> list[torch.Tensor]:
        """The `snac` package's codes: one [B, T * n] tensor per level, coarsest first (n = 1,
        2, 4(, 8) codes per coarse frame), for Codes or tokens [B, K, T]."""
        tokens, _, _ = self._check_codes(codes, clamp=False)
        return rows_to_levels(tokens, self.config)

    def from_levels(self, levels, num_samples=None) -> Codes:
        """Codes of the `snac` package's per-level list ([B, T * n] each, coarsest first, as its
        encode returns and its decode takes); num_samples [B] optional."""
        cfg = self.config
        count = len(cfg.codes_per_level)
        if not isinstance(levels, list | tuple) or len(levels) != count:
            got = f"{len(levels)} items" if isinstance(levels, list | tuple) else \
                type(levels).__name__
            raise CodesError(f"expected a list of {count} per-level code tensors (coarsest "
                             f"first), got {got}")
        levels = [_as_token_tensor(c, "per-level integer codes") for c in levels]
        if any(c.ndim != 2 for c in levels):
            raise CodesError("each level must be [B, T * n], got shapes "
                             f"{[tuple(c.shape) for c in levels]}")
        frames = levels[0].shape[-1]
        want = [(levels[0].shape[0], frames * n) for n in cfg.codes_per_level]
        if [tuple(c.shape) for c in levels] != want:
            raise CodesError(f"per-level codes must be {want} for {frames} coarse frames (level "
                             f"i has {list(cfg.codes_per_level)}[i] codes a frame), got "
                             f"{[tuple(c.shape) for c in levels]}")
        tokens = levels_to_rows([c.long().cpu() for c in levels], cfg)
        self._check_codes(tokens, clamp=False)
        lengths = torch.full((tokens.shape[0],), frames)
        return Codes(tokens, lengths, codec=self.name, sample_rate=self.sample_rate,
                     samples_per_frame=self.samples_per_frame,
                     num_samples=None if num_samples is None else torch.as_tensor(num_samples))

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self._decode_at(tokens, lengths, torch.zeros_like(lengths))

    def _decode_at(self, tokens: torch.Tensor, lengths: torch.Tensor, frame_offsets: torch.Tensor
                   ) -> torch.Tensor:
        """Items of one length as a batch, each length on its own (padding would reach a
        non-causal item's audio). A length that is not whole attention windows (32/44 kHz) is
        padded with copies of its last frame to whole windows, the padding's audio dropped."""
        spf = self.samples_per_frame
        out = torch.zeros(tokens.shape[0], 1, tokens.shape[-1] * spf, device=tokens.device)
        for n, group in by_length(lengths.tolist()):
            x = tokens[group][..., :n]
            pad = -n % self.streaming.window.align
            if pad:
                x = torch.cat([x, x[..., -1:].expand(-1, -1, pad)], -1)
            offsets = frame_offsets[group].to(tokens.device)
            audio = self._run("decode", self.model.decode, x, offsets)
            out[group, :, : n * spf] = audio[..., : n * spf].to(out.dtype)
        return out
