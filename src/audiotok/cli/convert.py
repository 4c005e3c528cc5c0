"""`audiotok encode`, `decode`, `reconstruct`: files in, files out."""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
from pathlib import Path

import click
import numpy as np
import soundfile as sf

from ..audio import AUDIO_SUFFIXES, write_audio
from ..codes import load_codes
from ..errors import AudiotokError, CodesError
from ..fileio import atomic_output
from .common import (
    CODES_SUFFIXES,
    fail,
    files_in_out,
    load_codec,
    model_options,
    one_line,
    plan,
    run_each,
    subtype_option,
)


@click.command()
@files_in_out("Output codes file (one input file) or folder (mirrors input folders).")
@click.option("--format", "fmt", type=click.Choice(["codes", "npy"]), default="codes",
              show_default=True,
              help="codes: self-describing archive; npy: integer [K, T] as fish-speech writes.")
@model_options
def encode(inputs, output, fmt, model, device, threads):
    """Encode audio files (or folders of them) into codes files."""
    pairs = plan(inputs, output, AUDIO_SUFFIXES, "." + fmt, CODES_SUFFIXES)
    codec = load_codec(model, device, threads)

    from ..streaming.files import encode_file

    def work(src: Path, dst: Path) -> str:
        codes = encode_file(codec, src)
        codes.save(dst)
        extra = f" + {codec.global_tokens} global tokens" if codec.global_tokens else ""
        return (f"{src} -> {dst}: {int(codes.lengths[0])} frames x {codec.num_codebooks} "
                f"codebooks{extra}")

    run_each(pairs, work)


def voice_option(f):
    return click.option(
        "--voice", type=click.Path(exists=True, dir_okay=False), default=None,
        help="A .voice file (audiotok voice) for a codec that decodes in a voice (S3 tokens' "
             "token-to-audio).")(f)


def conditioning(codec, voice: str | None) -> dict:
    """decode()'s keywords beside the codes: the voice, which a codec conditioned on one needs
    and others refuse."""
    if "voice" not in codec.decode_conditioning:
        if voice is not None:
            raise click.UsageError(f"--voice: {codec.title} decodes without a voice")
        return {}
    if voice is None:
        raise click.UsageError(f"{codec.title} decodes in a voice: pass --voice NAME.voice "
                               "(make one with `audiotok voice PROMPT -o NAME.voice`)")
    try:
        return {"voice": codec.load_voice(voice)}
    except AudiotokError as e:
        raise click.UsageError(f"--voice: {e}") from None


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
@click.option("--output", "-o", required=True,
              help="Output audio file (one input file) or folder; with --stream, a file or - "
                   "for raw PCM on stdout.")
@click.option("--clamp", is_flag=True,
              help="Clamp out-of-range tokens into the codebook instead of failing.")
@click.option("--stream", "stream_mode", is_flag=True,
              help="Decode incrementally and write audio as it goes (causal codecs). INPUT "
                   "is a codes file or - for text on stdin, one frame per line (K integers).")
@click.option("--push-frames", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --stream: frames decoded per step.")
@voice_option
@model_options
@subtype_option
def decode(inputs, output, clamp, stream_mode, push_frames, voice, model, device, threads,
           subtype):
    """Decode codes files (.codes or fish-speech .npy) into audio files."""
    if stream_mode:
        if len(inputs) != 1:
            raise click.UsageError("--stream takes one input (a codes file or -)")
        codec = load_codec(model, device, threads)
        try:
            _decode_stream(codec, inputs[0], output, clamp, push_frames, subtype)
        except (AudiotokError, OSError) as e:
            fail(one_line(e))
            sys.exit(1)
        return
    if "-" in inputs:
        raise click.UsageError("reading tokens from stdin (-) needs --stream")
    pairs = plan(inputs, output, CODES_SUFFIXES, ".wav", AUDIO_SUFFIXES)
    codec = load_codec(model, device, threads)
    extra = conditioning(codec, voice)
    from ..streaming.files import decode_to_file

    def work(src: Path, dst: Path) -> str:
        codes = load_codes(src)
        if len(codes) == 1:
            decode_to_file(codec, codes, dst, subtype, clamp=clamp, **extra)
            return f"{src} -> {dst}"
        audio = codec.decode(codes, clamp=clamp, **extra).cpu()
        written = []
        lengths = codec.audio_lengths(codes.lengths, codes.num_samples).tolist()
        for i, n in enumerate(lengths):
            target = dst if len(codes) == 1 else dst.with_name(f"{dst.stem}_{i}{dst.suffix}")
            write_audio(target, audio[i, :, :n], codec.sample_rate, subtype)
            written.append(str(target))
        return f"{src} -> {', '.join(written)}"

    run_each(pairs, work)


def _text_frames(lines, num_codebooks: int):
    """Frames [K, 1] from text lines of K integers (blank lines and # comments skipped)."""
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        try:
            values = [int(v) for v in line.split()]
        except ValueError:
            raise CodesError(f"stdin line {number}: not integers: {line[:60]!r}") from None
        if len(values) != num_codebooks:
            raise CodesError(f"stdin line {number}: expected {num_codebooks} integers (one "
                             f"frame), got {len(values)}")
        yield np.asarray(values, dtype=np.int64)[:, None]


def _decode_stream(codec, source: str, output: str, clamp: bool, push_frames: int,
                   subtype: str | None) -> None:
    """Push frames as they arrive; write each piece of audio at once."""
    limit, utterance = None, {}
    if source == "-":
        frames = _text_frames(sys.stdin, codec.num_codebooks)
    else:
        codes = load_codes(source)
        if len(codes) != 1:
            raise CodesError(f"{source}: --stream decodes one item, the file holds {len(codes)}")
        tokens = codes.tokens[0, :, : int(codes.lengths[0])]
        frames = iter(tokens.numpy().T[:, :, None])
        limit = int(codec.audio_lengths(codes.lengths, codes.num_samples)[0])
        if codes.globals is not None:  # (the utterance tokens, for codes that carry them)
            utterance = {"globals": codes.globals}
    with contextlib.ExitStack() as stack:
        dec = stack.enter_context(codec.stream_decoder(batch_size=1, clamp=clamp, **utterance))
        if output == "-":
            raw = np.int16 if subtype == "PCM_16" else np.float32
            write = _raw_writer(sys.stdout.buffer, raw)
        else:
            tmp = stack.enter_context(atomic_output(output))
            kind = Path(output).suffix.lstrip(".").upper()
            sink = stack.enter_context(sf.SoundFile(
                tmp, "w", codec.sample_rate, 1, subtype,
                format=kind if kind in sf.available_formats() else "WAV"))
            write = sink.write
        written, pending = 0, []
        for frame in itertools.chain(frames, [None]):
            if frame is not None:
                pending.append(frame)
            if pending and (len(pending) >= push_frames or frame is None):
                pcm = dec.push(np.concatenate(pending, -1)[None])[0, 0].numpy()
                pending = []
                if limit is not None:
                    pcm = pcm[: max(0, limit - written)]
                write(pcm)
                written += pcm.size
        write(dec.flush()[0, 0].numpy())


def _raw_writer(stream, dtype):
    def write(pcm: np.ndarray) -> None:
        data = (np.clip(pcm, -1, 1) * 32767).astype("<i2") if dtype == np.int16 else \
            pcm.astype("<f4")
        stream.write(data.tobytes())
        stream.flush()
    return write


@click.command()
@files_in_out("Output audio file (one input file) or folder.")
@click.option("--sample-rate", type=int, default=None,
              help="Resample the output to this rate (default: the codec's rate).")
@click.option("--voice", type=click.Path(exists=True, dir_okay=False), default=None,
              help="For a codec that decodes in a voice: a .voice file (default: each input "
                   "is its own voice prompt).")
@model_options
@subtype_option
def reconstruct(inputs, output, sample_rate, voice, model, device, threads, subtype):
    """Encode then decode audio files: hear what the codec keeps."""
    from ..audio import resample
    from ..streaming.files import decode_to_file, encode_file

    pairs = plan(inputs, output, AUDIO_SUFFIXES, ".wav", AUDIO_SUFFIXES)
    codec = load_codec(model, device, threads)
    rate = sample_rate or codec.sample_rate
    given = conditioning(codec, voice) if voice is not None else None

    def work(src: Path, dst: Path) -> str:
        t0 = time.perf_counter()
        codes = encode_file(codec, src)
        extra = codec.own_conditioning(str(src)) if given is None else given
        t1 = time.perf_counter()
        if rate == codec.sample_rate:
            decode_to_file(codec, codes, dst, subtype, **extra)
        else:
            audio = codec.decode(codes, **extra)[0].cpu().numpy()  # [C, N]
            if rate != codec.sample_rate:
                audio = resample(audio, codec.sample_rate, rate)
            write_audio(dst, audio, rate, subtype)
        t2 = time.perf_counter()
        seconds = int(codes.num_samples[0]) / codec.sample_rate
        src_rate = codes.meta["source_sample_rate"][0]
        frames = int(codes.lengths[0])
        return (f"{src} ({seconds:.2f} s, {src_rate} Hz) -> {frames} frames x "
                f"{codec.num_codebooks} codebooks ({codec.info()['bitrate_bps'] / 1000:.2f} kbit/s)"
                f" -> {dst} ({rate} Hz); encode {t1 - t0:.2f} s, decode {t2 - t1:.2f} s, "
                f"real-time factor {(t2 - t0) / seconds:.2f}")

    run_each(pairs, work)


@click.command()
@click.argument("prompt", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", required=True, help="The voice file to write (NAME.voice).")
@model_options
def voice(prompt, output, model, device, threads):
    """Make a voice from prompt speech (a few seconds of one speaker), for codecs that decode
    in one (S3 tokens' token-to-audio): its tokens, mel and speaker embedding."""
    codec = load_codec(model, device, threads)
    try:
        made = codec.make_voice(prompt)
        made.save(output)
    except (AudiotokError, OSError) as e:
        fail(one_line(e))
        sys.exit(1)
    click.echo(f"{prompt} -> {output}: {made.prompt_tokens} prompt tokens "
               f"({made.prompt_tokens / codec.frame_rate:.2f} s)")
