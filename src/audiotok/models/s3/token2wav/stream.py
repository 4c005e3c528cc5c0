"""CosyVoice 2's chunk-aware token-to-audio stream, as its reference runs it
(`CosyVoice2Model.tts(stream=True)` of cosyvoice-minicpmo 0.1.0), or exactly.

Tokens come in; a chunk of `hop` = 25 tokens (the first one padded so that the prompt and it end
on a chunk boundary) is spoken once the 3 tokens after it are in. Each chunk runs the flow in
its streaming mode over the prompt and every token so far (the 3 following tokens as the
pre-lookahead's context) and keeps the new chunk's mel; the vocoder runs on that mel after the
previous chunk's last 8 mel frames, with the previous chunk's last 3840 excitation samples in
place of its own first ones, cross-fades its first 3840 samples with the previous chunk's
withheld tail (the two halves of a 7680-point Hamming window) and withholds its own last 3840
samples. The stream's end runs the flow offline (no chunks) over all tokens, as the reference's
last call does, and withholds nothing.

The audio is the reference stream's: not the offline decode (its flow sees every token; a
chunk's flow sees its chunk and those before), and not the offline vocoder on the streamed mel
(the cross-fades). The vocoder's draws come from the stream's seed, chunk by chunk, in the
reference's order.

exact=True: the same chunks of the flow, its last one in the streaming mode too (the chunk
masks over all tokens, zeros after the last as the pre-lookahead's context), and the vocoder
carried across chunks (vocoder_stream.py): the audio of decode(..., chunked=True), each
sample once the vocoder's reach past it is in (REACH + F0_REACH + 1 = 18 mel frames, 360 ms,
after the chunk's 3 tokens of lookahead)."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from ....errors import AudiotokError
from .config import TOKEN_MEL_RATIO
from .flow import FlowRow
from .hift import HiftNoise
from .vocoder_stream import ExactVocoder
from .voice import Voice

MEL_CACHE = 8  # mel frames each vocoder call repeats from the chunk before
SOURCE_CACHE = MEL_CACHE * 480  # excitation samples carried over, and samples cross-faded


class ChunkStream:
    """One stream of B rows (tokens of one length, one voice; row b draws from seeds[b], or
    every row from one int seed): push(tokens [B, 1, t]) -> audio [B, 1, n] now final;
    finish() -> the rest."""

    def __init__(self, model, voice: Voice, seed: int | list[int], steps: int | None, device,
                 exact: bool = False):
        self.model, self.voice, self.steps, self.device = model, voice, steps, device
        self.seed, self.exact = seed, exact
        self.vocoder: ExactVocoder | None = None  # (exact: made at the first push)
        self.generators: list[torch.Generator] = []  # one per row, at the first push
        self.tokens = torch.zeros(0, 0, dtype=torch.long)
        self.offset = 0  # tokens spoken so far
        hop = model.flow.config.chunk
        self.hop, self.lookahead = hop, model.flow.config.lookahead
        prompt = voice.tokens.numel()
        self.first_hop = hop + math.ceil(prompt / hop) * hop - prompt
        self.cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self.done = False

    def copy(self) -> ChunkStream:
        new = object.__new__(ChunkStream)
        new.__dict__.update(self.__dict__)
        new.generators = [torch.Generator().set_state(g.get_state()) for g in self.generators]
        if self.vocoder is not None:
            new.vocoder = copy.copy(self.vocoder)
            new.vocoder.generators = new.generators
        return new

    def push(self, tokens: torch.Tensor, scales=None) -> torch.Tensor:
        """tokens [B, 1, t] -> audio [B, 1, n] of the chunks they complete."""
        return ChunkStream.push_together([self], [tokens], [False])[0]

    def finish(self) -> torch.Tensor:
        """The audio of the tokens not yet spoken (the flow over all tokens: offline, or in
        the streaming mode for an exact stream)."""
        return ChunkStream.push_together([self], [None], [True])[0]

    @staticmethod
    def push_together(streams: list[ChunkStream], tokens: list, ending: list[bool]
                      ) -> list[torch.Tensor]:
        """push(tokens[i]) for each stream (None: nothing new), then finish() where ending[i],
        the streams of one model at once: the flows of the chunks that become ready in the
        same round run as the rows of one call (Flow.rows; the guided pair is already two
        rows each), by rounds of one chunk per stream; the vocoder runs per stream. Each
        stream's audio is what it gives alone."""
        for stream, t in zip(streams, tokens, strict=True):
            if t is not None:
                stream._append(t)
        outs: list[list[torch.Tensor]] = [[] for _ in streams]
        while True:
            ready = [(i, c) for i, s in enumerate(streams)
                     if (c := s._next_chunk(ending[i])) is not None]
            if not ready:
                break
            groups: dict[tuple, list] = {}
            for i, (end, last) in ready:
                s = streams[i]
                key = (s.steps or s.model.flow.config.steps, s.exact or not last)
                groups.setdefault(key, []).append((i, end, last))
            for (steps, streaming), members in groups.items():
                rows = [r for i, end, last in members for r in streams[i]._flow_rows(end, last)]
                mels = iter(streams[members[0][0]].model.flow.rows(rows, steps, streaming))
                for i, end, last in members:
                    s = streams[i]
                    mel = torch.stack([next(mels) for _ in s.generators])
                    outs[i].append(s._vocode(mel[..., TOKEN_MEL_RATIO * s.offset:], last))
                    s.offset = end
        return [torch.cat(o, -1) if o else s._empty() for s, o in zip(streams, outs, strict=True)]

    def _append(self, tokens: torch.Tensor) -> None:
        if not self.generators:
            b = tokens.shape[0]
            seeds = [self.seed] * b if isinstance(self.seed, int) else list(self.seed)
            if len(seeds) != b:
                raise AudiotokError(f"seed: one int, or one per row ({b}), got {len(seeds)}")
            self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
            self.tokens = torch.zeros(b, 0, dtype=torch.long)
            if self.exact:
                self.vocoder = ExactVocoder(self.model.hift, self.generators)
        self.tokens = torch.cat([self.tokens, tokens[:, 0].cpu().long()], 1)

    def _next_chunk(self, ending: bool) -> tuple[int, bool] | None:
        """(end, last) of the chunk to speak next: the next hop of tokens once the lookahead
        after it is in, else (ending) every token left, once; None: nothing yet."""
        if self.done:
            return None
        hop = self.first_hop if self.offset == 0 else self.hop
        if self.tokens.shape[1] - self.offset >= hop + self.lookahead:
            return self.offset + hop, False
        if ending:
            self.done = True
            if self.tokens.shape[-1]:
                return self.tokens.shape[1], True
        return None

    def _empty(self) -> torch.Tensor:
        return torch.zeros(max(1, len(self.generators)), 1, 0)

    def _flow_rows(self, end: int, last: bool) -> list[FlowRow]:
        """The flow's rows for tokens offset..end (the reference's `token2wav`): every token
        so far after the voice's prompt, with the lookahead tokens after `end` as context
        (none for the last chunk), and the fixed noise."""
        voice = self.voice
        noise = self.model.noise(TOKEN_MEL_RATIO * (voice.tokens.numel() + end), None)[0]
        context = None if last else self.tokens[:, end: end + self.lookahead]
        return [FlowRow(self.tokens[b, :end], voice.tokens, voice.mel.float(),
                        voice.embedding.float(), noise, None if context is None else context[b])
                for b in range(self.tokens.shape[0])]

    def _vocode(self, mel: torch.Tensor, last: bool) -> torch.Tensor:
        """The audio of a chunk's new mel [B, 80, n]: the exact vocoder's samples now final, or
        the reference's cached vocoder call."""
        if self.vocoder is not None:
            return self.vocoder.push(mel, last).float().cpu()
        return self._cached_vocoder(mel, last)

    def _cached_vocoder(self, mel: torch.Tensor, last: bool) -> torch.Tensor:
        """The reference's vocoder call with its mel, source and speech caches."""
        model = self.model
        if self.cache is not None:
            mel = torch.cat([self.cache[0], mel], -1)
        draws = [HiftNoise.draw(model.hift.config, 1, mel.shape[-1], g) for g in self.generators]
        source = model.hift.excitation(mel, HiftNoise(
            torch.cat([d.phase for d in draws]).to(self.device),
            torch.cat([d.noise for d in draws]).to(self.device)))
        if self.cache is not None:
            source[..., :SOURCE_CACHE] = self.cache[1]
        audio = model.hift.generate(mel, source).float().cpu()
        if self.cache is not None:
            audio = _cross_fade(audio, self.cache[2])
        if last:
            return audio
        self.cache = (mel[..., -MEL_CACHE:], source[..., -SOURCE_CACHE:],
                      audio[..., -SOURCE_CACHE:])
        return audio[..., :-SOURCE_CACHE]


def _cross_fade(audio: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
    """audio's first samples faded in over the previous chunk's withheld tail fading out (the
    halves of a Hamming window, in float64 as the reference's numpy window makes them)."""
    window = torch.from_numpy(np.hamming(2 * SOURCE_CACHE))
    n = SOURCE_CACHE
    out = audio.clone()
    out[..., :n] = (audio[..., :n].double() * window[:n] + tail.double() * window[n:]).float()
    return out
