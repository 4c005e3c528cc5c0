"""What `eval` compares: audiotok codecs and classic baselines that need no weights.

A system takes an item's mono audio at the item's own rate and gives back its reconstruction at
the system's rate, with the tokens (codecs) and the time each half took.

Specs (`-m`): a model name or path for `audiotok.load` (optionally `NAME=PATH`);
`opus:6k` (any bitrate 6k..256k; Ogg Opus at 48 kHz through libsndfile); `resample:16k`
(resample to that rate and back: what resampling alone costs); `identity` (the original
itself: the metrics' own ceiling, and DNSMOS of the originals).
"""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass, field

import numpy as np
import soundfile as sf
import torch

from ..audio import resample
from ..errors import AudiotokError

OPUS_RATE = 48000
OPUS_MIN, OPUS_MAX = 6000, 256000  # libsndfile's range for one channel


@dataclass
class Output:
    audio: np.ndarray | None  # float32 [N] at the system's rate; None: an encode-only codec
    rate: int
    encode_seconds: float = 0.0
    decode_seconds: float = 0.0
    tokens: np.ndarray | None = None  # [K, T] (codecs)
    bits: float | None = None  # what the representation takes (baselines: the file's size)
    conditioning: dict = field(default_factory=dict)  # what the decode took beside the codes


@dataclass
class System:
    """One thing evaluated. `name` labels it in results and reports; `spec` is what made it."""

    name: str
    spec: str
    kind: str  # "codec", "opus", "resample", "identity"
    facts: dict = field(default_factory=dict)

    @property
    def reconstructs(self) -> bool:
        """Whether run() gives audio back (an encode-only codec gives its tokens alone)."""
        return True

    def run(self, audio: np.ndarray, rate: int) -> Output:
        raise NotImplementedError

    def warmup(self) -> None:
        """One short call, so that the first item's times are not the start-up's."""
        self.run(np.zeros(16000, np.float32), 16000)


class CodecSystem(System):
    def __init__(self, name: str, spec: str, codec, reference=None):
        facts = {**codec.info(), "dtype": str(codec.dtype).removeprefix("torch.")}
        super().__init__(name, spec, "codec", facts)
        self.codec = codec
        self.reference = reference  # the same model at the reference precision, or None

    @property
    def reconstructs(self) -> bool:
        return self.codec.decode_refusal is None

    def run(self, audio: np.ndarray, rate: int) -> Output:
        codec = self.codec
        t0 = time.perf_counter()
        codes = codec.encode(audio, rate)
        t1 = time.perf_counter()
        tokens = codes.tokens[0, :, : int(codes.lengths[0])].numpy()
        bits = float(tokens.shape[1] * sum(np.log2(codec.codebook_sizes)))
        if codec.global_tokens:  # the utterance tokens are part of what the codes carry
            bits += codec.global_tokens * float(np.log2(codec.global_codebook_size))
        if not self.reconstructs:  # encode only: its tokens and their statistics
            return Output(None, codec.sample_rate, t1 - t0, 0.0, tokens, bits)
        # a codec conditioned on a voice speaks in the input's own (made outside the timings)
        conditioning = codec.own_conditioning(audio, rate)
        t2 = time.perf_counter()
        y = codec.decode(codes, **conditioning)[0].mean(0)  # (stereo: its channels' mean)
        t3 = time.perf_counter()
        return Output(y.numpy(), codec.sample_rate, t1 - t0, t3 - t2, tokens, bits,
                      conditioning)

    def precision(self, audio: np.ndarray, rate: int, out: Output) -> dict[str, float]:
        """Against the reference precision: the share of tokens equal to its tokens, and the SNR
        (dB) of this precision's decoding of the reference tokens against the reference's."""
        from .metrics import snr

        ref_codes = self.reference.encode(audio, rate)
        ref_tokens = ref_codes.tokens[0, :, : int(ref_codes.lengths[0])].numpy()
        if ref_tokens.shape != out.tokens.shape:
            raise AudiotokError(f"token shapes differ: {out.tokens.shape} and {ref_tokens.shape}")
        if out.audio is None:
            return {"tokens_equal": float((ref_tokens == out.tokens).mean())}
        ref_audio = self.reference.decode(
            ref_codes, **self.reference.own_conditioning(audio, rate))[0, 0].numpy()
        ours = self.codec.decode(ref_codes, **out.conditioning)[0, 0].numpy()  # (run()'s voice)
        return {"tokens_equal": float((ref_tokens == out.tokens).mean()),
                "decode_snr_vs_reference": snr(ref_audio, ours)}


class OpusSystem(System):
    def __init__(self, name: str, spec: str, bitrate: int):
        super().__init__(name, spec, "opus", {"sample_rate": OPUS_RATE, "bitrate": bitrate,
                                              "encoder": f"libsndfile {sf.__libsndfile_version__}"})
        # libsndfile maps compression level 0..1 linearly onto 256..6 kbit/s for one channel
        self.level = 1.0 - (bitrate - OPUS_MIN) / (OPUS_MAX - OPUS_MIN)

    def run(self, audio: np.ndarray, rate: int) -> Output:
        x = resample(audio, rate, OPUS_RATE)
        t0 = time.perf_counter()
        buf = io.BytesIO()
        sf.write(buf, np.clip(x, -1, 1), OPUS_RATE, format="OGG", subtype="OPUS",
                 compression_level=self.level)
        t1 = time.perf_counter()
        buf.seek(0)
        y, _ = sf.read(buf, dtype="float32")
        t2 = time.perf_counter()
        return Output(y[: len(x)], OPUS_RATE, t1 - t0, t2 - t1,
                      bits=8.0 * ogg_audio_bytes(buf.getvalue()))


def ogg_audio_bytes(data: bytes) -> int:
    """Bytes of an Ogg Opus file after its two header pages (OpusHead, OpusTags): the audio
    packets with their page framing, what a stream of this bitrate costs."""
    pos = 0
    for _ in range(2):
        if data[pos: pos + 4] != b"OggS":
            raise AudiotokError("not an Ogg stream")
        segments = data[pos + 26]
        pos += 27 + segments + sum(data[pos + 27: pos + 27 + segments])
    return len(data) - pos


class ResampleSystem(System):
    def __init__(self, name: str, spec: str, rate: int | None):
        super().__init__(name, spec, "identity" if rate is None else "resample",
                         {} if rate is None else {"sample_rate": rate})
        self.rate = rate

    def run(self, audio: np.ndarray, rate: int) -> Output:
        if self.rate is None:
            return Output(audio, rate)
        t0 = time.perf_counter()
        y = resample(audio, rate, self.rate)
        return Output(y, self.rate, time.perf_counter() - t0, 0.0)


def _rate(text: str, spec: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(k?)(?:hz|bps|b/s)?", text.strip().lower())
    if not m:
        raise AudiotokError(f"{spec!r}: expected a number like 6k or 16000")
    return int(round(float(m.group(1)) * (1000 if m.group(2) else 1)))


def parse_spec(spec: str) -> tuple[str, str]:
    """(name, model) of a -m value: NAME=MODEL or MODEL (named after itself, see model_name)."""
    if "=" in spec and not spec.startswith(("opus:", "resample:")):
        name, model = spec.split("=", 1)
        if not name or not model:
            raise AudiotokError(f"expected NAME=MODEL, got {spec!r}")
        return name, model
    return model_name(spec), spec


def model_name(spec: str) -> str:
    """A short name for a model spec: a baseline as it is, a model as hub.model_label names it."""
    from ..hub import model_label

    if spec.startswith(("opus:", "resample:")) or spec == "identity":
        return spec
    return model_label(spec)


def make_system(spec: str, *, device=None, dtype=torch.float32,
                reference_dtype: torch.dtype | None = None) -> System:
    name, model = parse_spec(spec)
    if model == "identity":
        return ResampleSystem(name, spec, None)
    if model.startswith("opus:"):
        bitrate = _rate(model[5:], spec)
        if not OPUS_MIN <= bitrate <= OPUS_MAX:
            raise AudiotokError(f"{spec!r}: Opus bitrate must be 6k to 256k (libsndfile, mono)")
        return OpusSystem(name, spec, bitrate)
    if model.startswith("resample:"):
        return ResampleSystem(name, spec, _rate(model[9:], spec))
    from ..models import load

    codec = load(model, device=device, dtype=dtype)
    reference = None
    if reference_dtype is not None and reference_dtype != dtype:
        reference = load(model, device=device, dtype=reference_dtype)
    return CodecSystem(name, spec, codec, reference)
