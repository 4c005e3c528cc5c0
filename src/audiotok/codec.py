"""The codec API shared by every model: encode any audio into Codes, decode Codes into audio."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from ._version import __version__
from .audio import AudioItem, to_items
from .chunking import FrameMath
from .codes import Codes
from .errors import AudiotokError, CodesError
from .fileio import atomic_output
from .models.family import licence_notice
from .nn.cuda_graphs import GraphCache
from .nn.precision import set_precision
from .nn.streaming import StreamCopies
from .streaming.spec import StreamSpec
from .tokencheck import (
    BATCH_PLACE,
    CLAMP_HINT,
    check_batch,
    check_utterance,
    rank_error,
    within_codebooks,
)

if TYPE_CHECKING:
    from .models.family import Family

_ANNOUNCED: set[tuple[str, str]] = set()


class Codec(FrameMath):
    """A loaded codec. A family's subclass (models/<family>/codec.py) sets `family`, its
    `streaming` spec and the facts in __init__, and implements `from_checkpoint`,
    `_encode_batch` (or `_encode_items`) and `_decode_batch`; a "steps" or "segments" stream
    also its `step_stream` or `segment_stream`."""

    family: Family  # the declaration in models/<family>/__init__.py: name, title, licence
    # How the codec streams, each direction (streaming/spec.py): what the library's
    # stream_decoder()/stream_encoder(), the engine and the exports run. A family whose
    # variants (or load options) differ refines it in __init__, from the loaded configuration.
    streaming: StreamSpec = StreamSpec(decode=None)
    channels: int = 1  # audio channels in and out (2: EnCodec 48 kHz's stereo)
    frame_rule: str = "ceil"  # samples -> frames (chunking.frames_for): "ceil", "plus_one"...
    # what the error for an input shorter than one frame (under a "floor" rule) suggests
    short_input_hint: str = "pad it to at least one frame"
    # None: decode() works; else the sentence an encode-only codec's decode() raises (what turns
    # its codes back into audio instead)
    decode_refusal: str | None = None
    # what decode() takes beside the codes, by keyword: () nothing; ("voice",): a voice, made
    # once from prompt speech with make_voice() (a token-to-audio model conditioned on a
    # speaker: the S3 tokens' decoder)
    decode_conditioning: tuple[str, ...] = ()
    # utterance tokens (Codes.globals): how many each item carries beside its frames (BiCodec's
    # 32 global tokens) and their codebook's size; 0: none
    global_tokens: int = 0
    global_codebook_size: int = 0

    def __init__(self, model: nn.Module, config, *, source: str = "", device=None,
                 dtype: torch.dtype = torch.float32, cuda_graphs: bool = False):
        self.model = set_precision(model.to(device=device), dtype, model.float32_islands())
        self.model.eval()
        self.config = config
        self.source = source
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.dtype = dtype
        # model calls by name -> their CUDA graphs (nn/cuda_graphs.py); None: eager execution
        self.graphs: dict[str, GraphCache] | None = (
            {} if cuda_graphs and self.device.type == "cuda" else None)

    _copies: StreamCopies | None = None

    def stream_copies(self) -> StreamCopies:
        """Copies of the model with their own streaming state, lent to streams and to offline
        calls that stream long inputs in pieces (kept for reuse: copying takes tens of
        milliseconds)."""
        if self._copies is None or self._copies.module is not self.model:
            self._copies = StreamCopies(self.model)
        return self._copies

    def _run(self, name: str, fn, *args: torch.Tensor) -> torch.Tensor:
        """fn(*args), through a CUDA graph per input shape when graphs are on. `fn` must be the
        same computation on every call with this `name` (the first one is captured)."""
        if self.graphs is None:
            return fn(*args)
        if name not in self.graphs:
            self.graphs[name] = GraphCache(fn)
        return self.graphs[name](*args)

    # -- facts -------------------------------------------------------------------------------
    sample_rate: int
    samples_per_frame: int
    num_codebooks: int
    codebook_sizes: tuple[int, ...]

    @property
    def all_codebook_sizes(self) -> tuple[int, ...]:
        """Sizes of every codebook the weights hold (codebook_sizes: those encode() gives)."""
        return self.codebook_sizes

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def title(self) -> str:
        return self.family.title

    @property
    def licence(self) -> str:
        return self.family.licence

    def info(self) -> dict:
        bits = sum(float(np.log2(s)) for s in self.codebook_sizes)
        return {
            "codec": self.name,
            "model": self.title,
            "source": self.source,
            **self.rate_facts(),
            "channels": self.channels,
            "samples_per_frame": self.samples_per_frame,
            "frame_rate": self.frame_rate,
            "num_codebooks": self.num_codebooks,
            "codebook_sizes": list(self.codebook_sizes),
            "bitrate_bps": round(bits * self.frame_rate, 2),
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "dtype": str(self.dtype).replace("torch.", ""),
            "device": str(self.device),
            "cuda_graphs": self.graphs is not None,
            "decodes": self.decode_refusal is None,
            "decode_conditioning": list(self.decode_conditioning),
            "global_tokens": self.global_tokens,
            "global_codebook_size": self.global_codebook_size,
            "weights_licence": self.licence,
        }

    def weights_sha256(self) -> str:
        """sha256 of the loaded weights (names, dtypes, shapes, bytes), whatever file they came
        from: what corpus and evaluation outputs record to know their model again."""
        h = hashlib.sha256()
        for name, t in sorted(self.model.state_dict().items()):
            t = t.detach().cpu().contiguous()
            h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return h.hexdigest()

    def announce_licence(self) -> None:
        """Tell the user, once per process and codec, which licence the weights carry."""
        if (self.name, self.title) not in _ANNOUNCED:  # (a family's models may differ)
            _ANNOUNCED.add((self.name, self.title))
            print(licence_notice(self.title, self.licence), file=sys.stderr)

    # -- encode ------------------------------------------------------------------------------
    def encode(self, x, sample_rate: int | None = None) -> Codes:
        """Tokens of one item or a batch.

        x: a path, bytes of an audio file, a numpy array or torch tensor ([N] mono or [C, N]
        channels-first for one item, [B, C, N] for a batch), or a list of single items of any
        lengths and channel counts. Arrays are at `sample_rate` (default: the codec's
        input_rate);
        audio is downmixed (or, for a stereo codec, mono put on both channels) and resampled as
        needed.
        """
        items = to_items(x, sample_rate, self.input_rate, channels=self.channels)
        for it in items:
            self.check_whole_frame(it.samples.shape[-1], self.short_input_hint)
        with torch.inference_mode():
            tokens = self._encode_items(items)
        scales = utterance = None
        if isinstance(tokens, Encoded):  # tokens and each item's segment scales or globals
            encoded, tokens = tokens, tokens.tokens
            if encoded.scales is not None:
                scales = torch.zeros(len(tokens), max(len(v) for v in encoded.scales))
                for i, v in enumerate(encoded.scales):
                    scales[i, : len(v)] = v
            if encoded.globals is not None:
                utterance = torch.stack(encoded.globals).long()
        lengths = torch.tensor([t.shape[-1] for t in tokens])
        batch = torch.zeros(len(tokens), self.num_codebooks, int(lengths.max()), dtype=torch.long)
        for i, t in enumerate(tokens):
            batch[i, :, : t.shape[-1]] = t
        return Codes(
            tokens=batch, lengths=lengths, codec=self.name, sample_rate=self.sample_rate,
            samples_per_frame=self.samples_per_frame,
            num_samples=torch.tensor([self.output_samples(it.samples.shape[-1]) for it in items]),
            meta={"codec_version": __version__, "model": self.title,
                  "source_sample_rate": [it.source_rate for it in items],
                  "source_num_samples": [it.source_samples for it in items]},
            scales=scales, globals=utterance,
        )

    def _encode_items(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Tokens [K, T_i] per item. Default: one zero-padded batch, valid for causal codecs;
        where each convolution pads its own input at the end (StreamSpec.end_padding "layers"),
        an item that is not whole frames runs alone, unpadded (zeros after it would change its
        last frame)."""
        if self.streaming.end_padding == "layers":
            spf = self.input_samples_per_frame
            whole = [i for i, it in enumerate(items) if it.samples.numel() % spf == 0]
            out: list[torch.Tensor | None] = [None] * len(items)
            if whole:
                for i, t in zip(whole, self._encode_padded([items[i] for i in whole]),
                                strict=True):
                    out[i] = t
            for i, it in enumerate(items):
                if out[i] is None:
                    audio = it.samples.to(self.device).view(1, 1, -1)
                    out[i] = self._encode_batch(audio)[0].cpu()
            return out
        return self._encode_padded(items)

    def _encode_padded(self, items: list[AudioItem]) -> list[torch.Tensor]:
        """Tokens [K, T_i] per item of one zero-padded batch."""
        frames = [self.num_frames(it.samples.numel()) for it in items]
        length = max(frames) * self.input_samples_per_frame
        audio = torch.zeros(len(items), 1, length, device=self.device)  # float32: the model casts
        for i, it in enumerate(items):
            audio[i, 0, : it.samples.numel()] = it.samples.to(self.device)
        tokens = self._encode_batch(audio).cpu()
        return [tokens[i, :, :n] for i, n in enumerate(frames)]

    def _encode_batch(self, audio: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _encode_by_length(self, items: list[AudioItem], lengths: list[int], encode=None
                          ) -> list[torch.Tensor]:
        """Tokens [K, T_i] per item, each zero-padded to lengths[i] samples; items of one length
        run as one batch, every other length on its own (for a codec whose padding would reach
        a shorter item's codes). encode: what runs a batch (default model.encode)."""
        out: list[torch.Tensor | None] = [None] * len(items)
        for n, group in by_length(lengths):
            audio = torch.stack([F.pad(items[i].samples.to(self.device).view(1, -1),
                                       (0, n - items[i].samples.numel())) for i in group])
            tokens = self._run("encode", encode or self.model.encode, audio).cpu()
            for j, i in enumerate(group):
                out[i] = tokens[j]
        return out

    def _encode_causal(self, audio: torch.Tensor) -> torch.Tensor:
        """model.encode(audio) for a causal codec, long inputs through its stream in pieces of
        StreamSpec.pieces frames (the same tokens). A last piece shorter than a frame is the
        stream's end, completed as the offline pass completes it."""
        chunk = self.streaming.pieces
        if self.graphs is not None or chunk is None or \
                audio.shape[-1] <= chunk * self.input_samples_per_frame:
            return self._run("encode", self.model.encode, audio)
        from .streaming.layers import run_in_pieces

        return run_in_pieces(self, "encode", audio, chunk)

    # -- decode ------------------------------------------------------------------------------
    def decode(self, codes, *, clamp: bool = False, frame_offsets=None, globals=None
               ) -> torch.Tensor:
        """Audio float32 [B, C, N] (C: the codec's channels) for Codes or integer tokens
        [B, K, T] / [K, T].

        Each item is trimmed to its length (the samples it was encoded from when known, else
        frames * samples_per_frame) and zero beyond it; N is the longest item. Tokens outside a
        codebook raise CodesError, or are clamped into range with clamp=True. frame_offsets
        (per item): where each item's first frame sits in a longer stream, for a codec whose
        output depends on absolute position (a decoder's seeded noise); others ignore it.
        globals [B, G] / [G]: a codec with utterance tokens (global_tokens) decodes each item
        with its own (Codes carry them; given here they replace the Codes').
        """
        if self.decode_refusal is not None:
            raise AudiotokError(self.decode_refusal)
        tokens, lengths, num_samples = self._check_codes(codes, clamp)
        utterance = self.check_globals(
            getattr(codes, "globals", None) if globals is None else globals, tokens.shape[0],
            clamp)
        scales = getattr(codes, "scales", None)
        with torch.inference_mode():
            if utterance is not None:
                audio = self._decode_global(tokens.to(self.device), lengths,
                                            utterance.to(self.device))
            elif scales is not None:
                audio = self._decode_scaled(tokens.to(self.device), lengths,
                                            torch.as_tensor(scales, dtype=torch.float32))
            elif frame_offsets is None:
                audio = self._decode_batch(tokens.to(self.device), lengths)
            else:
                offsets = torch.as_tensor(frame_offsets, dtype=torch.long).reshape(-1)
                if offsets.numel() != tokens.shape[0] or bool((offsets < 0).any()):
                    raise CodesError(f"frame_offsets must be {tokens.shape[0]} frame numbers "
                                     ">= 0, one per item")
                audio = self._decode_at(tokens.to(self.device), lengths, offsets)
            audio = audio.float()
        out_len = self.audio_lengths(lengths, num_samples)
        n_max = int(out_len.max())
        audio = audio[..., :n_max].clone()
        for i, n in enumerate(out_len.tolist()):
            audio[i, :, n:] = 0
        return audio

    def check_globals(self, utterance, batch: int, clamp: bool = False) -> torch.Tensor | None:
        """Utterance tokens [batch, global_tokens] (int64, in range) for a codec that has them,
        None for one without (tokencheck.check_utterance says what is refused)."""
        g = check_utterance(utterance, batch, self.global_tokens, self.global_codebook_size,
                            self.title, clamp)
        return None if g is None else torch.from_numpy(g)

    def _decode_global(self, tokens: torch.Tensor, lengths: torch.Tensor, utterance: torch.Tensor
                       ) -> torch.Tensor:
        """_decode_batch for a codec with utterance tokens [B, G] (global_tokens); its output
        does not depend on absolute position (frame_offsets do not apply)."""
        raise NotImplementedError

    def make_voice(self, audio, sample_rate: int | None = None):
        """A voice from prompt speech, for a codec whose decode() takes one
        (decode_conditioning)."""
        raise AudiotokError(f"{self.title} decodes without a voice")

    def load_voice(self, path):
        """A voice file (written by make_voice(...).save(path)) for a codec whose decode()
        takes one."""
        raise AudiotokError(f"{self.title} decodes without a voice")

    def own_conditioning(self, audio, sample_rate: int | None = None) -> dict:
        """What decoding an input's own codes takes beside them (reconstruction: the input is
        its own voice prompt); {} for a codec that takes nothing."""
        if "voice" in self.decode_conditioning:
            return {"voice": self.make_voice(audio, sample_rate)}
        return {}

    def audio_lengths(self, lengths: torch.Tensor, num_samples: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """Samples each item decodes to: the length it was encoded from when known (at most its
        frames), else frames * samples_per_frame."""
        out = lengths.cpu() * self.samples_per_frame
        return out if num_samples is None else torch.minimum(num_samples.cpu(), out)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Audio [B, 1, T * samples_per_frame] for in-range tokens [B, K, T] (zeros past each
        item's length in frames)."""
        raise NotImplementedError

    def _decode_scaled(self, tokens: torch.Tensor, lengths: torch.Tensor, scales: torch.Tensor
                       ) -> torch.Tensor:
        """_decode_batch for codes that carry scales (Codes.scales: a codec that normalises
        its input's segments overrides it)."""
        raise CodesError(f"these codes carry segment scales, which {self.title} does not use")

    def _decode_by_length(self, tokens: torch.Tensor, lengths: torch.Tensor, decode=None,
                          *rows: torch.Tensor) -> torch.Tensor:
        """_decode_batch for a codec whose padding would reach a shorter item's audio: items of
        one length as one batch, every other length on its own. decode: what runs a batch
        (default model.decode); rows: per-item tensors [B, ...] it also takes (each batch's
        rows of them, e.g. the utterance tokens)."""
        out = torch.zeros(tokens.shape[0], 1, tokens.shape[-1] * self.samples_per_frame,
                          device=tokens.device)
        for n, group in by_length(lengths.tolist()):
            audio = self._run("decode", decode or self.model.decode, tokens[group][..., :n],
                              *(r[group] for r in rows))
            out[group, :, : audio.shape[-1]] = audio.to(out.dtype)
        return out

    def _decode_at(self, tokens: torch.Tensor, lengths: torch.Tensor, frame_offsets: torch.Tensor
                   ) -> torch.Tensor:
        """_decode_batch for items that start at frame_offsets of their streams; a codec whose
        output depends on absolute position overrides it."""
        return self._decode_batch(tokens, lengths)

    def _decode_causal(self, tokens: torch.Tensor) -> torch.Tensor:
        """model.decode(tokens) for a causal codec, long inputs through its stream in pieces of
        StreamSpec.pieces frames (the same audio; the padding after an item cannot reach it)."""
        chunk = self.streaming.pieces
        if self.graphs is not None or chunk is None or tokens.shape[-1] <= chunk:
            return self._run("decode", self.model.decode, tokens)
        from .streaming.layers import run_in_pieces

        return run_in_pieces(self, "decode", tokens, chunk)

    @property
    def decode_codebooks(self) -> range:
        """How many codebook rows decode() takes (the first k of the codec's codebooks):
        exactly num_codebooks unless the codec decodes any leading subset."""
        return range(self.num_codebooks, self.num_codebooks + 1)

    def _check_codes(self, codes, clamp: bool):
        num_samples = None
        if isinstance(codes, Codes):
            codes.require_codec(self.name)  # torch tensors, or numpy arrays (the ONNX runtime's)
            tokens, lengths = _as_token_tensor(codes.tokens), torch.as_tensor(codes.lengths)
            num_samples = None if codes.num_samples is None else torch.as_tensor(codes.num_samples)
        else:
            tokens = _as_token_tensor(codes)
            if tokens.ndim == 2:
                tokens = tokens[None]
            if tokens.ndim != 3:
                raise rank_error(tokens.shape)
            lengths = torch.full((tokens.shape[0],), tokens.shape[2])
        allowed = self.decode_codebooks
        check_batch(tuple(tokens.shape), lengths.tolist(), self.name, allowed)
        t = tokens.shape[-1]
        tokens = tokens.long().clone()
        valid = torch.arange(t)[None, :] < lengths.cpu()[:, None]  # [B, T]
        tokens.masked_fill_(~valid[:, None, :].to(tokens.device), 0)
        host = tokens.cpu().numpy()
        checked = within_codebooks(host, self.all_codebook_sizes[: tokens.shape[1]], clamp,
                                   BATCH_PLACE, CLAMP_HINT)
        if checked is not host:
            tokens = torch.from_numpy(checked).to(tokens.device)
        return tokens, lengths.cpu().long(), None if num_samples is None else num_samples.cpu()

    # -- streaming ---------------------------------------------------------------------------
    def stream_decoder(self, batch_size: int = 1, *, clamp: bool = False,
                       window: tuple[int, int] | None = None, **options):
        """Incremental decoder: `with codec.stream_decoder(B) as dec: pcm = dec.push(tokens)`
        (streaming/library.py). The output equals the offline decode for every exact stream
        (StreamSpec: "layers", "steps", "segments", exact windows). `window`: (left, lookahead)
        frames of context of a windowed stream instead (a codec that offers windows); fewer
        lookahead frames give audio sooner, no longer exactly the offline decode. For codes
        that carry segment scales, `dec.push(tokens, scales)` takes them too. options: what a
        codec that decodes in a voice (decode_conditioning) takes, as decode() does (voice=,
        seed=)."""
        from .streaming import WINDOWS, no_stream
        from .streaming.library import StreamDecoder
        from .streaming.windows import check_window, library_window

        # (a codec that decodes in a voice checks its own options; utterance tokens are the
        # codes' own)
        extra = set(options) - ({"globals"} if self.global_tokens else set())
        if extra and not self.decode_conditioning:
            raise AudiotokError(f"{self.title} decodes from its codes alone: stream_decoder() "
                                f"takes no {', '.join(sorted(extra))}")
        if self.global_tokens:
            options = dict(options, globals=self.check_globals(options.get("globals"),
                                                               batch_size, clamp))
        spec = self.streaming
        if why := self.stream_refusal("decode"):
            raise AudiotokError(why)
        if window is None and (spec.decode is None or
                               (spec.decode == WINDOWS and not spec.window.exact)):
            raise AudiotokError(no_stream(self, "decode"))
        if window is not None or spec.decode == WINDOWS:
            window = library_window(self, window)
            check_window(self, window)
        return StreamDecoder(self, batch_size, clamp, window, options)

    def stream_encoder(self, batch_size: int = 1):
        """Incremental encoder: `with codec.stream_encoder(B) as enc: tokens = enc.push(audio)`;
        audio [B, n] (or [B, C, n] for a codec of C channels) at the codec's input rate;
        `enc.flush()` encodes the last partial frame (as the offline encode completes it);
        `enc.scales`: the segments' scales, for codes that carry them."""
        from .streaming import no_stream
        from .streaming.library import StreamEncoder

        if self.streaming.encode is None:
            raise AudiotokError(no_stream(self, "encode"))
        refusal = self.stream_refusal("encode")
        if refusal:
            raise AudiotokError(refusal)
        return StreamEncoder(self, batch_size)

    def stream_refusal(self, direction: str) -> str | None:
        """Why this codec, as loaded, cannot stream in `direction` although its family can (a
        setting that keeps unbounded state); None: it can."""
        return None

    def step_stream(self, direction: str):
        """A "steps" codec's new stream of `direction` (nn/stream_steps.py's DecoderStream or
        EncoderStream over its layers' steps)."""
        raise NotImplementedError

    def segment_stream(self, direction: str, **conditioning):
        """A "segments" or "chunks" codec's new stream of `direction`: push(...) -> what became
        final, finish() -> the rest, copy(); an encoder's `scales` (see streaming/segments.py).
        conditioning: what a stream decoder decodes with (decode_conditioning)."""
        raise NotImplementedError

    # -- saving ------------------------------------------------------------------------------
    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write config.json and model.safetensors (float32) for `audiotok.load(directory)`."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        sd = {k: v.detach().float().cpu().contiguous() for k, v in self.model.state_dict().items()}
        with atomic_output(d / "model.safetensors") as tmp:
            save_file(sd, str(tmp), metadata={"codec": self.name, "format": "audiotok"})
        config = {"codec": self.name, "format_version": 1, **self.config.to_dict()}
        with atomic_output(d / "config.json") as tmp:
            tmp.write_text(json.dumps(config, indent=1) + "\n")


@dataclass
class Encoded:
    """What a codec's _encode_items returns when its codes carry more than tokens: each item's
    tokens [K, T_i] and its segments' scales [S_i] (Codes.scales) or its utterance tokens [G]
    (Codes.globals)."""

    tokens: list[torch.Tensor]
    scales: list[torch.Tensor] | None = None
    globals: list[torch.Tensor] | None = None


def codebooks_setting(codebooks, total: int) -> int:
    """A codec's `codebooks` load option: how many of its `total` codebooks encode() gives
    (None: all)."""
    if codebooks is None:
        return total
    if not isinstance(codebooks, int) or isinstance(codebooks, bool) or \
            not 1 <= codebooks <= total:
        raise AudiotokError(f"codebooks must be 1..{total}, got {codebooks!r}")
    return codebooks


def by_length(lengths: list[int]) -> list[tuple[int, list[int]]]:
    """(length, indices of the items of that length) for each distinct length: a non-causal
    codec runs each as its own batch (padding would reach the shorter items' output)."""
    return [(n, [i for i, f in enumerate(lengths) if f == n]) for n in sorted(set(lengths))]


def _as_token_tensor(x, expected: str = "an integer array or Codes") -> torch.Tensor:
    """x (a tensor, or anything numpy reads as an array) as an integer tensor."""
    if isinstance(x, torch.Tensor):
        t = x
    else:
        try:
            t = torch.from_numpy(np.asarray(x))
        except (TypeError, ValueError):
            raise CodesError(f"tokens must be {expected}, got {type(x).__name__}") from None
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise CodesError(f"tokens must be integers, got dtype {t.dtype}")
    return t
