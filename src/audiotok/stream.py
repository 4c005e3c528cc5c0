"""Exact streaming for causal codecs: push tokens, get audio; push audio, get tokens.

    with codec.stream_decoder(batch_size=1) as dec:
        for chunk in token_source:        # integer [B, K, t], any t >= 1
            pcm = dec.push(chunk)         # float32 [B, 1, samples_per_frame * t]
        pcm = dec.flush()                 # what remains (nothing for a causal codec)

Each stream works on its own copy of the model's modules (parameters shared), so streams and
offline calls do not disturb one another. The output equals the offline result of the whole
sequence (up to float rounding); work per frame is constant and memory bounded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ._version import __version__
from .chunking import window_start
from .codes import Codes
from .errors import AudioError, CodesError


def _check_batch_size(batch_size) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


class _Stream:
    def __init__(self, codec, batch_size: int):
        _check_batch_size(batch_size)
        self.codec = codec
        self.batch_size = batch_size
        self.model = None  # inside `with`: a copy of the codec's model with its own state
        self._context = None

    def __enter__(self):
        self._context = self.codec._stream_copies().streamed()
        self.model = self._context.__enter__()
        return self

    def __exit__(self, *exc):
        self._context.__exit__(*exc)
        self._context = None
        self.model = None

    def _check_open(self):
        if self._context is None:
            raise RuntimeError("use the stream inside a `with` block")


class StreamDecoder(_Stream):
    """Tokens in, audio out, one push at a time (see the module docstring)."""

    def __init__(self, codec, batch_size: int = 1, clamp: bool = False):
        super().__init__(codec, batch_size)
        self.clamp = clamp
        self.frames = 0

    def push(self, tokens) -> torch.Tensor:
        """Audio float32 [B, 1, samples_per_frame * t] for tokens [B, K, t]."""
        self._check_open()
        tokens = _token_chunk(tokens, self.batch_size, self.codec)
        if tokens.shape[-1] == 0:
            return torch.zeros(self.batch_size, 1, 0)
        tokens, _, _ = self.codec._check_codes(tokens, self.clamp)
        with torch.inference_mode():
            audio = self.model.decode(tokens.to(self.codec.device)).float()
        self.frames += tokens.shape[-1]
        return audio

    def flush(self) -> torch.Tensor:
        """Audio still held back: none, since every frame's audio is returned when pushed."""
        self._check_open()
        return torch.zeros(self.batch_size, 1, 0)


class _TokenStream:
    """A decoder stream that keeps its own state outside the model's modules: the batch size,
    the `with` block, and each push's tokens checked and counted."""

    def __init__(self, codec, batch_size: int, clamp: bool):
        _check_batch_size(batch_size)
        self.codec, self.batch_size, self.clamp = codec, batch_size, clamp
        self.frames = 0
        self._open = False

    def __enter__(self):
        self._open = True
        return self

    def __exit__(self, *exc):
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("use the stream inside a `with` block")

    def _tokens(self, tokens) -> torch.Tensor:
        """Pushed tokens [B, K, t], checked (or clamped), counted; t may be 0."""
        self._check_open()
        tokens = _token_chunk(tokens, self.batch_size, self.codec)
        if tokens.shape[-1] == 0:
            return tokens.long()
        tokens, _, _ = self.codec._check_codes(tokens, self.clamp)
        self.frames += tokens.shape[-1]
        return tokens


class WindowedStreamDecoder(_TokenStream):
    """Tokens in, audio out for a non-causal codec whose windows decode exactly
    (Codec.stream_exact): each push returns the audio of the frames that now have `lookahead`
    frames after them, decoded in one window with `left` frames of context before (starts
    aligned to `window_align` frames); flush() returns the rest. Every sample comes out once,
    equal to the offline decode of the whole sequence. Latency: `lookahead` frames. `window`
    (left, lookahead) replaces the codec's; shorter than its own, the audio is no longer
    exactly the offline decode (the codec's page gives the deviation)."""

    def __init__(self, codec, batch_size: int = 1, clamp: bool = False,
                 window: tuple[int, int] | None = None):
        super().__init__(codec, batch_size, clamp)
        self.left, _, self.lookahead = codec.stream_window
        if window is not None:
            if (not isinstance(window, tuple | list) or len(window) != 2
                    or not all(isinstance(w, int) and w >= 0 for w in window)):
                raise ValueError(f"window must be (left, lookahead) frames >= 0, got {window!r}")
            self.left, self.lookahead = window
        codec.check_lookahead(self.lookahead)
        self.align = codec.window_align
        self.history = torch.zeros(batch_size, codec.num_codebooks, 0, dtype=torch.long)
        self.start = 0  # the stream frame history[..., 0] is
        self.emitted = 0

    def push(self, tokens) -> torch.Tensor:
        """Audio float32 [B, 1, samples_per_frame * e] for tokens [B, K, t]: the e frames that
        became ready (0 until `lookahead` frames follow the first)."""
        self.history = torch.cat([self.history, self._tokens(tokens).cpu()], -1)
        ready = self.frames - self.lookahead - self.emitted
        return self._emit(ready - ready % self.align if ready > 0 else 0)

    def flush(self) -> torch.Tensor:
        """The audio of the frames still held back (the last `lookahead`)."""
        self._check_open()
        return self._emit(self.frames - self.emitted)

    def _emit(self, count: int) -> torch.Tensor:
        codec, spf = self.codec, self.codec.samples_per_frame
        if count <= 0:
            return torch.zeros(self.batch_size, 1, 0)
        first = window_start(self.emitted, self.left, self.align)
        stop = min(self.frames, self.emitted + count + self.lookahead)
        window = self.history[..., first - self.start : stop - self.start]
        audio = codec.decode(window, frame_offsets=[first] * self.batch_size)
        keep = audio[..., (self.emitted - first) * spf : (self.emitted - first + count) * spf]
        self.emitted += count
        drop = window_start(self.emitted, self.left, self.align) - self.start
        self.history, self.start = self.history[..., drop:], self.start + drop
        return keep


class StepStreamDecoder(_TokenStream):
    """Tokens in, audio out through a codec's own stateful decoder stream (`make()` returns an
    object with push(tokens [B, K, t]) -> audio [B, C, n] and finish() -> the rest): each frame
    decoded once, the audio out as soon as it is final (any number of samples a push), the
    whole equal to the offline decode. For a codec whose codes carry segment scales
    (Codes.scales), push(tokens, scales) also takes the scales [B, j] of the next j segments
    (a stream encoder's `scales`); a segment's audio waits for its scale."""

    def __init__(self, codec, make, batch_size: int = 1, clamp: bool = False):
        super().__init__(codec, batch_size, clamp)
        self.make = make
        self.inner = None

    def __enter__(self):
        self.inner = self.make()
        return super().__enter__()

    def push(self, tokens, scales=None) -> torch.Tensor:
        """Audio float32 [B, C, n] for tokens [B, K, t] (and the scales [B, j] of the next j
        segments, for codes that carry them): the samples these frames make final."""
        tokens = self._tokens(tokens)
        if tokens.shape[-1] == 0 and scales is None:
            return torch.zeros(self.batch_size, self.codec.channels, 0)
        with torch.inference_mode():
            if self.codec.codes_carry_scales:
                out = self.inner.push(tokens.to(self.codec.device),
                                      _scale_chunk(scales, self.batch_size))
            elif scales is not None:
                raise CodesError(f"{self.codec.title} codes carry no segment scales")
            else:
                out = self.inner.push(tokens.to(self.codec.device))
            return out.float().cpu()

    def flush(self) -> torch.Tensor:
        """The rest of the audio (the stream's end); the stream is done after it."""
        self._check_open()
        with torch.inference_mode():
            out = self.inner.finish().float().cpu()
        return out if out.shape[0] == self.batch_size else \
            out.expand(self.batch_size, self.codec.channels, -1)


class StreamEncoder(_Stream):
    """Audio in (at the codec's rate), tokens out as soon as each frame's samples are complete."""

    def __init__(self, codec, batch_size: int = 1):
        super().__init__(codec, batch_size)
        self.pending = torch.zeros(batch_size, 0)
        self.samples = 0

    def push(self, audio) -> torch.Tensor:
        """Tokens [B, K, t] (t >= 0) for audio [B, n] at the codec's input rate."""
        self._check_open()
        chunk = _audio_chunk(audio, self.batch_size)
        self.samples += chunk.shape[-1]
        self.pending = torch.cat([self.pending, chunk], dim=-1)
        spf = self.codec.input_samples_per_frame
        whole = self.pending.shape[-1] // spf * spf
        ready, self.pending = self.pending[:, :whole], self.pending[:, whole:]
        return self._encode(ready)

    def flush(self) -> torch.Tensor:
        """Tokens of the last partial frame, padded as offline encode pads it: zeros up to a
        whole frame, or, for a codec whose every convolution pads its own input
        (Codec.pads_per_layer), the samples as they are (the streaming convolutions pad the
        stream's end as an offline pass does)."""
        self._check_open()
        spf = self.codec.input_samples_per_frame
        rest = self.pending
        self.pending = torch.zeros(self.batch_size, 0)
        if rest.shape[-1] == 0 or self.codec.pads_per_layer:
            return self._encode(rest)
        return self._encode(torch.nn.functional.pad(rest, (0, spf - rest.shape[-1])))

    def _encode(self, audio: torch.Tensor) -> torch.Tensor:
        if audio.shape[-1] == 0:
            return torch.zeros(self.batch_size, self.codec.num_codebooks, 0, dtype=torch.long)
        codec = self.codec
        with torch.inference_mode():
            x = audio[:, None].to(codec.device)  # float32: the model casts
            return self.model.encode(x).cpu()


class StepStreamEncoder:
    """Audio in, tokens out through a codec's own stateful encoder stream (`make()`; see
    Codec.encoder_stream): each frame's tokens as soon as its samples are in, the last partial
    frame's at flush, the whole equal to the offline encode. Audio [B, n], or [B, C, n] for a
    codec of C channels (mono [B, n] goes on every channel); for codes that carry segment
    scales, `scales` is every segment's so far ([B, S])."""

    def __init__(self, codec, make, batch_size: int = 1):
        _check_batch_size(batch_size)
        self.codec, self.make, self.batch_size = codec, make, batch_size
        self.inner = None
        self.samples = 0

    def __enter__(self):
        self.inner = self.make()
        return self

    def __exit__(self, *exc):
        self.inner = None

    def _check_open(self) -> None:
        if self.inner is None:
            raise RuntimeError("use the stream inside a `with` block")

    def push(self, audio) -> torch.Tensor:
        """Tokens [B, K, t] (t >= 0) for audio [B, n] (or [B, C, n]) at the codec's rate."""
        self._check_open()
        chunk = _audio_chunk(audio, self.batch_size, self.codec.channels)
        self.samples += chunk.shape[-1]
        with torch.inference_mode():
            return self.inner.push(chunk.to(self.codec.device, self.codec.stream_input_dtype)).cpu()

    @property
    def scales(self) -> torch.Tensor:
        """The scales [B, S] of the segments encoded so far (codes that carry them)."""
        if not self.codec.codes_carry_scales:
            raise AttributeError(f"{self.codec.title} codes carry no segment scales")
        self._check_open()
        got = self.inner.scales
        return torch.zeros(self.batch_size, 0) if got is None else \
            got.float().cpu().expand(self.batch_size, -1)

    def flush(self) -> torch.Tensor:
        """The tokens of the rest (the stream's end); the stream is done after it."""
        self._check_open()
        with torch.inference_mode():
            out = self.inner.finish().cpu()
        return out if out.shape[0] == self.batch_size else out.expand(self.batch_size, -1, -1)


def _token_chunk(tokens, batch_size: int, codec) -> torch.Tensor:
    t = tokens if isinstance(tokens, torch.Tensor) else torch.from_numpy(np.asarray(tokens))
    if t.ndim != 3 or t.shape[0] != batch_size or t.shape[1] != codec.num_codebooks:
        raise CodesError(f"pushed tokens must be [{batch_size}, {codec.num_codebooks}, t], got "
                         f"shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise CodesError(f"tokens must be integers, got dtype {t.dtype}")
    return t


def _audio_chunk(audio, batch_size: int, channels: int | None = None) -> torch.Tensor:
    """Pushed audio checked: [B, n] (channels None), else [B, channels, n] (mono [B, n] on
    every channel)."""
    x = audio if isinstance(audio, torch.Tensor) else torch.from_numpy(np.asarray(audio))
    if channels is not None and x.ndim == 2:
        x = x[:, None].expand(-1, channels, -1)
    want = f"[{batch_size}, n]" if channels is None else \
        f"[{batch_size}, n] or [{batch_size}, {channels}, n]"
    if x.ndim != (2 if channels is None else 3) or x.shape[0] != batch_size or \
            (channels is not None and x.shape[1] != channels):
        raise AudioError(f"pushed audio must be {want}, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise AudioError(f"pushed audio must be float, got dtype {x.dtype}")
    x = x.detach().float().cpu()
    if not torch.isfinite(x).all():
        raise AudioError("pushed audio contains NaN or Inf")
    return x


def _scale_chunk(scales, batch_size: int) -> torch.Tensor | None:
    """Pushed segment scales checked: None, or finite floats [B, j]."""
    if scales is None:
        return None
    x = scales if isinstance(scales, torch.Tensor) else torch.from_numpy(np.asarray(scales))
    if x.ndim != 2 or x.shape[0] != batch_size or not x.is_floating_point():
        raise CodesError(f"pushed scales must be floats [{batch_size}, segments], got "
                         f"{x.dtype} {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise CodesError("pushed scales contain NaN or Inf")
    return x.float()


def encode_file(codec, path, block_seconds: float = 20.0) -> Codes:
    """Codes of an audio file. For a causal codec whose encoder streams, long files are read,
    downmixed, resampled and encoded block by block, so memory stays bounded; tokens equal
    `codec.encode(path)`, which is what other codecs and short files get."""
    import soundfile as sf
    import soxr

    from .audio import check_complete

    name = str(path)
    try:
        info = sf.info(name)
    except (sf.LibsndfileError, RuntimeError, TypeError) as e:
        raise AudioError(f"{name}: cannot read audio ({e})") from None
    if not (codec.causal and codec.encoder_streams) or \
            info.frames < 10 * info.samplerate * block_seconds:
        return codec.encode(path)
    check_complete(info.extra_info, name)
    resampler = None
    if info.samplerate != codec.input_rate:
        resampler = soxr.ResampleStream(info.samplerate, codec.input_rate, 1, dtype="float32",
                                        quality="HQ")
    block = int(block_seconds * info.samplerate)
    tokens, produced, consumed = [], 0, 0
    with sf.SoundFile(name) as f, codec.stream_encoder(batch_size=1) as enc:
        while True:
            data = f.read(block, dtype="float32", always_2d=True)
            consumed += data.shape[0]
            last = data.shape[0] < block  # a short read is the end (frame counts may be estimates)
            mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
            if not np.isfinite(mono).all():
                raise AudioError(f"{name}: audio contains NaN or Inf")
            if resampler is not None:
                mono = resampler.resample_chunk(mono, last=last)
            produced += mono.size
            tokens.append(enc.push(torch.from_numpy(np.ascontiguousarray(mono))[None]))
            if last:
                break
        tokens.append(enc.flush())
    all_tokens = torch.cat(tokens, -1)
    return Codes(tokens=all_tokens, lengths=torch.tensor([all_tokens.shape[-1]]),
                 codec=codec.name, sample_rate=codec.sample_rate,
                 samples_per_frame=codec.samples_per_frame,
                 num_samples=torch.tensor([codec.output_samples(produced)]),
                 meta={"codec_version": __version__, "model": codec.title,
                       "source_sample_rate": [info.samplerate],
                       "source_num_samples": [consumed]})


def decode_to_file(codec, codes: Codes, path, subtype: str | None = None,
                   push_frames: int = 32, clamp: bool = False) -> int:
    """Decode item 0 of `codes` into an audio file, atomically (a temporary file renamed at the
    end). A causal codec writes as it goes, in bounded memory. Returns the samples written."""
    import soundfile as sf

    from .audio import write_audio
    from .fileio import atomic_output

    codes.require_codec(codec.name)
    n_total = int(codec.audio_lengths(codes.lengths[:1], None if codes.num_samples is None
                                      else codes.num_samples[:1])[0])
    if not codec.causal:
        audio = codec.decode(codes[0], clamp=clamp)[0, :, :n_total]
        write_audio(path, audio, codec.sample_rate, subtype)
        return audio.shape[-1]
    tokens = codes.tokens[:1, :, : int(codes.lengths[0])]
    kind = Path(path).suffix.lstrip(".").upper()
    kind = kind if kind in sf.available_formats() else "WAV"
    written = 0
    with atomic_output(path) as tmp, sf.SoundFile(tmp, "w", codec.sample_rate, 1, subtype,
                                                  format=kind) as out, \
            codec.stream_decoder(batch_size=1, clamp=clamp) as dec:
        for start in range(0, tokens.shape[-1], push_frames):
            pcm = dec.push(tokens[..., start : start + push_frames])[0, 0].numpy()
            pcm = pcm[: max(0, n_total - written)]
            out.write(pcm)
            written += pcm.size
    return written
