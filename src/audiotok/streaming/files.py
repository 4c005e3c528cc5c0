"""Files through a causal codec's streams: long audio files encoded block by block, codes
decoded into an audio file as they go, in bounded memory; other codecs whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .._version import __version__
from ..codes import Codes
from ..errors import AudioError
from .spec import LAYERS


def encode_file(codec, path, block_seconds: float = 20.0) -> Codes:
    """Codes of an audio file. For a causal codec whose encoder streams, long files are read,
    downmixed, resampled and encoded block by block, so memory stays bounded; tokens equal
    `codec.encode(path)`, which is what other codecs and short files get."""
    import soundfile as sf
    import soxr

    from ..audio import check_complete

    name = str(path)
    try:
        info = sf.info(name)
    except (sf.LibsndfileError, RuntimeError, TypeError) as e:
        raise AudioError(f"{name}: cannot read audio ({e})") from None
    if codec.streaming.encode != LAYERS or codec.stream_refusal("encode") or \
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
                   push_frames: int = 32, clamp: bool = False, **conditioning) -> int:
    """Decode item 0 of `codes` into an audio file, atomically (a temporary file renamed at the
    end). A causal codec writes as it goes, in bounded memory. `conditioning`: what decode()
    takes beside the codes (a voice). Returns the samples written."""
    import soundfile as sf

    from ..audio import write_audio
    from ..fileio import atomic_output

    codes.require_codec(codec.name)
    n_total = int(codec.audio_lengths(codes.lengths[:1], None if codes.num_samples is None
                                      else codes.num_samples[:1])[0])
    if codec.streaming.decode != LAYERS or conditioning:
        audio = codec.decode(codes[0], clamp=clamp, **conditioning)[0, :, :n_total]
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
