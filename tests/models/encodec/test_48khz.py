"""EnCodec 48 kHz stereo (1 s segments every 47520 samples, each normalised to unit rms and
encoded alone; decoding scales each segment back and overlap-adds them): codes and scales
identical to the `encodec` package and, segment by segment, to transformers' EncodecModel,
audio within AUDIO_PARITY of the package's, for short inputs, a short last segment (96500
samples: 150, 150 and 5 frames), every segment layout; mono input on both channels; a batch
equal to its items alone; the scales through a .codes file; codes without scales; streams
segment by segment equal to offline; clear refusals."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError, CodesError
from audiotok.models.encodec import segments
from audiotok.models.encodec.config import ENCODEC_48KHZ
from tests.bounds import AUDIO_PARITY, SAME_MODEL
from tests.models.encodec import reference

LENGTHS = (1, 319, 320, 321, 967, 47520, 47521, 48000, 96500)


def noise(n: int, seed: int, channels: int = 2) -> torch.Tensor:
    return 0.2 * torch.randn(channels, n, generator=torch.Generator().manual_seed(seed))


def package(ref, x: torch.Tensor):
    """The package's codes [1, K, T], scales [1, S] and audio [1, 2, N] of x [2, N]."""
    frames = reference.reference_segments(ref, x[None])
    with torch.no_grad():
        audio = ref.decode(frames)[..., : x.shape[-1]]
    return (torch.cat([f[0] for f in frames], -1),
            torch.stack([f[1].view(-1) for f in frames], 1), audio)


@pytest.fixture(scope="module")
def codec(enc48_ref):
    return audiotok.load(enc48_ref.th)


def test_codes_scales_and_audio_equal_the_package(enc48_ref, codec):
    assert codec.config == ENCODEC_48KHZ and codec.channels == 2
    assert (codec.num_codebooks, codec.samples_per_frame, codec.sample_rate) == (16, 320, 48000)
    for i, n in enumerate(LENGTHS):
        x = noise(n, i)
        want_codes, want_scales, want_audio = package(enc48_ref.ref, x)
        codes = codec.encode(x, 48000)
        assert torch.equal(codes.tokens, want_codes), n
        assert torch.equal(codes.scales, want_scales), n
        assert codec.num_frames(n) == codes.tokens.shape[-1], n
        audio = codec.decode(codes)
        assert audio.shape == want_audio.shape == (1, 2, n)
        assert (audio - want_audio).abs().max() <= AUDIO_PARITY, n
    assert codes.tokens.shape[-1] == 305 and codes.scales.shape == (1, 3)  # 150 + 150 + 5
    assert len(torch.unique(codes.tokens)) > 500  # not degenerate


def test_transformers_gives_the_same_codes_per_segment(enc48_ref, codec):
    """transformers pads the last segment's codes to 150 frames (`last_frame_pad_length`),
    and decodes as the package once given that."""
    x = noise(96500, 20)
    codes = codec.encode(x, 48000)
    with torch.no_grad():
        hf = enc48_ref.hf.encode(x[None], bandwidth=24.0)
        hf_audio = enc48_ref.hf.decode(hf.audio_codes, hf.audio_scales,
                                       last_frame_pad_length=hf.last_frame_pad_length)
    start = 0
    for s, frames in enumerate((150, 150, 5)):
        assert torch.equal(hf.audio_codes[s][..., :frames],
                           codes.tokens[..., start : start + frames])
        assert torch.equal(hf.audio_scales[s].view(-1), codes.scales[:, s])
        start += frames
    assert hf.last_frame_pad_length == 145
    assert (codec.decode(codes) - hf_audio.audio_values[..., :96500]).abs().max() <= AUDIO_PARITY


def test_every_segment_layout_follows_from_the_frame_count():
    """Decoding knows each item's segments from its frame count alone: for every length up to
    2 s, and around the third segment's start, the layout of its frames is its own."""
    cfg = ENCODEC_48KHZ
    for n in [*range(1, 96001), *range(95000, 96200)]:
        own = segments.frames_of(cfg, n)
        assert segments.segment_frames(cfg, sum(own)) == own, n


def test_where_the_package_fails_the_overlap_spans_every_segment(enc48_ref, codec):
    """47681-47840 samples: a first segment of 150 frames (48000 samples decoded) and a last of
    one; the package's overlap-add is sized by the last segment and fails. audiotok's spans
    both: each segment decoded and scaled as the package's _decode_frame, then overlap-added."""
    x = noise(47700, 30)
    codes = codec.encode(x, 48000)
    frames = reference.reference_segments(enc48_ref.ref, x[None])
    assert [f[0].shape[-1] for f in frames] == [150, 1]
    with torch.no_grad():
        pieces = [enc48_ref.ref._decode_frame(f) for f in frames]
        with pytest.raises(RuntimeError):
            enc48_ref.ref.decode(frames)
    mix = segments.OverlapAdd(47520)
    for piece in pieces:
        mix.add(piece)
    want = mix.take(mix.end)[..., :47700]
    assert (codec.decode(codes) - want).abs().max() <= AUDIO_PARITY


def test_segments_decode_in_groups_and_group_norm_in_halves(codec, monkeypatch):
    """decode() runs the LSTMs of up to DECODE_GROUP segments as one batch, a shorter last
    segment zero-padded at its end: the same audio as each segment alone (within SAME_MODEL), in
    groups of 1, 2 or all; the decoder's GroupNorm of a channels-last row in two halves equals
    nn.GroupNorm's (even and odd lengths, a batch)."""
    from audiotok.nn.kernels import group_norm

    codes = codec.encode(noise(96500, 70), 48000)  # segments of 150, 150 and 5 frames
    audio = {}
    for group in (1, 2, 16):
        monkeypatch.setattr(segments, "DECODE_GROUP", group)
        audio[group] = codec.decode(codes)
    assert audio[1].shape == audio[16].shape == (1, 2, 96500)
    for group in (2, 16):
        assert 0 < (audio[group] - audio[1]).abs().max() <= SAME_MODEL, group
    norm = torch.nn.GroupNorm(1, 32)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
        for shape in ((1, 4000, 32), (1, 4001, 32), (3, 4000, 32)):
            y = (0.5 * torch.randn(shape) + torch.randn(32)).transpose(1, 2)  # channels-last
            got = group_norm(y, norm)
            assert (got - norm(y.contiguous())).abs().max() <= SAME_MODEL, shape


def test_bfloat16_decodes_finite_audio(enc48_ref, codec):
    """dtype=bfloat16 (the codebooks in float32): the overlap-add in float32 (its triangle in
    bfloat16 rounds its first weight to 0: the first sample was 0 / 0), the audio near
    float32's."""
    bf16 = audiotok.load(enc48_ref.th, dtype="bfloat16")
    x = noise(50000, 71)
    codes = bf16.encode(x, 48000)
    audio, exact = bf16.decode(codes), codec.decode(codes)
    assert audio.dtype == torch.float32 and torch.isfinite(audio).all()
    assert (audio - exact).abs().max() < 0.05 * exact.abs().max()
    # the encode stream scales each segment in float32, as encode() does, then casts: the same
    # codes (a push rounded to bfloat16 first gave 86-90 % of them)
    with bf16.stream_encoder() as enc:
        got = [enc.push(x[None, :, at : at + 7000]) for at in range(0, x.shape[-1], 7000)]
        got.append(enc.flush())
        assert torch.equal(enc.scales, codes.scales)
    assert torch.equal(torch.cat(got, -1), codes.tokens)


def test_mono_input_a_batch_and_the_scales_in_a_codes_file(enc48_ref, codec, tmp_path):
    mono = noise(5000, 40, channels=1)
    want_codes, want_scales, _ = package(enc48_ref.ref, mono.expand(2, -1))
    got = codec.encode(mono[0], 48000)  # as the package's convert_audio: on both channels
    assert torch.equal(got.tokens, want_codes) and torch.equal(got.scales, want_scales)
    items = [noise(n, 50 + i) for i, n in enumerate((96500, 3000, 96500, 48000))]
    batch = codec.encode(items, 48000)
    audio = codec.decode(batch)
    assert batch.scales.shape == (4, 3)
    for i, item in enumerate(items):
        alone = codec.encode(item, 48000)
        t = int(batch.lengths[i])
        assert torch.equal(batch.tokens[i, :, :t], alone.tokens[0])
        torch.testing.assert_close(batch.scales[i, : alone.scales.shape[1]], alone.scales[0],
                                   rtol=1e-6, atol=0)  # (a batched mean rounds its own way)
        assert (audio[i, :, : item.shape[-1]] - codec.decode(alone)[0]).abs().max() <= SAME_MODEL
    path = tmp_path / "stereo.codes"
    batch.save(path)
    back = audiotok.Codes.load(path)
    assert torch.equal(back.scales, batch.scales)
    assert torch.equal(codec.decode(back), audio)
    assert torch.equal(codec.decode(back[1]), codec.decode(batch[1]))


def test_codes_without_scales_and_refusals(enc48_ref, codec):
    x = noise(50000, 60)
    codes = codec.encode(x, 48000)
    frames = reference.reference_segments(enc48_ref.ref, x[None])
    with torch.no_grad():  # the package decodes a segment without a scale unscaled
        want = enc48_ref.ref.decode([(f[0], None) for f in frames])
    raw = codec.decode(codes.tokens)
    assert raw.shape == want.shape and (raw - want).abs().max() <= AUDIO_PARITY
    short = audiotok.Codes(codes.tokens, codes.lengths, scales=codes.scales[:, :1])
    with pytest.raises(CodesError, match="2 segments; the codes carry 1 segment scales"):
        codec.decode(short)
    with pytest.raises(AudiotokError, match="3 channels; this codec takes mono or 2"):
        codec.encode(noise(100, 1, channels=3), 48000)
    mono_codec = audiotok.load(reference.save_th(reference.encodec_model(), enc48_ref.th.parent
                                                 / "mono", "encodec_24khz-x.th"))
    with pytest.raises(CodesError, match="segment scales, which .* does not use"):
        mono_codec.decode(audiotok.Codes(torch.zeros(1, 32, 3, dtype=torch.long),
                                         torch.tensor([3]), scales=torch.ones(1, 1)))
    assert np.isfinite(raw.numpy()).all()


def test_bandwidth_and_the_hub_name(enc48_ref, tmp_path):
    from tests.test_hub import load_through_cache

    x = noise(3000, 70)
    codec = audiotok.load(enc48_ref.th, bandwidth="6")
    assert codec.num_codebooks == 4 and codec.bandwidth == 6.0
    frames = reference.reference_segments(enc48_ref.ref, x[None], 6.0)
    assert torch.equal(codec.encode(x, 48000).tokens, frames[0][0])
    stderr, codes = load_through_cache(tmp_path, "facebook/encodec_48khz", enc48_ref.hf_dir,
                                       "encodec-48khz", x.numpy(), 48000,
                                       options=", bandwidth='6'")
    assert "licence not stated" in stderr
    assert np.array_equal(codes, frames[0][0].numpy())


def test_the_command_line_writes_stereo(enc48_ref, codec, tmp_path):
    import soundfile as sf
    from click.testing import CliRunner

    from audiotok.cli import main

    x = noise(50000, 80)
    sf.write(tmp_path / "in.wav", x.T.numpy(), 48000, subtype="FLOAT")
    run = CliRunner().invoke
    for args in (["encode", str(tmp_path / "in.wav"), "-o", str(tmp_path / "in.codes")],
                 ["decode", str(tmp_path / "in.codes"), "-o", str(tmp_path / "out.wav")]):
        r = run(main, [*args, "--model", str(enc48_ref.th)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
    out, rate = sf.read(tmp_path / "out.wav", dtype="float32")
    want = codec.decode(codec.encode(x, 48000))[0].numpy()
    assert rate == 48000 and out.shape == (50000, 2)
    assert np.abs(out.T - want).max() <= 1 / 32767 + SAME_MODEL  # (16-bit PCM, the default)
    r = run(main, ["encode", str(tmp_path / "in.wav"), "-o", str(tmp_path / "in.npy"), "--model",
                   str(enc48_ref.th)])
    assert r.exit_code != 0 and "carry segment scales; save as .codes" in r.output
    assert not (tmp_path / "in.npy").exists()


def test_streams_equal_offline_segment_by_segment(codec):
    """Lengths around the segment layouts (47600: 149 + 1 frames; 47700: 150 + 1; 96500: 150 +
    150 + 5), mono and stereo pushes of several sizes: tokens and scales identical to encode();
    decoded with 1-frame and ragged pushes, the audio equal to decode() in length and within
    1e-5 (measured 9e-7: decode() runs its segments' LSTMs as one batch, a stream each alone,
    and a batch's sums round their own way). The first tokens come with a whole segment, the
    first audio once the frame after a whole segment is in."""
    for i, n in enumerate((321, 47600, 47700, 96500)):
        x = noise(n, 90 + i)
        offline = codec.encode(x, 48000)
        for push in (3000, 48000 + 17):
            with codec.stream_encoder() as enc:
                got = [enc.push(x[None, :, at : at + push]) for at in range(0, n, push)]
                assert enc.scales.shape[1] == (n >= 48000 + 17) * (1 + (n >= 48000 + 47520))
                got.append(enc.flush())
                assert torch.equal(enc.scales, offline.scales), (n, push)
            assert torch.equal(torch.cat(got, -1), offline.tokens), (n, push)
        want = codec.decode(audiotok.Codes(offline.tokens, offline.lengths,
                                           scales=offline.scales))
        frames = offline.tokens.shape[-1]
        for push in (1, 151 - 7):
            with codec.stream_decoder() as dec:
                out, first = [], None
                for at in range(0, frames, push):
                    out.append(dec.push(offline.tokens[..., at : at + push],
                                        offline.scales[:, :1] if at == 0 else
                                        offline.scales[:, 1:] if at == push else None))
                    if first is None and out[-1].shape[-1]:
                        first = at + push
                out.append(dec.flush())
            assert_stream_equal(torch.cat(out, -1), want, (n, push))
            if push == 1 and frames > 151:
                assert first == 151 and out[150].shape == (1, 2, 47520)
    with codec.stream_encoder() as enc, codec.stream_decoder() as dec:  # chained (x: 96500)
        out, sent = [], 0
        for at in range(0, x.shape[-1] + 3000, 3000):  # (empty pushes too)
            tokens = enc.push(x[None, :, at : at + 3000]) if at < x.shape[-1] else enc.flush()
            out.append(dec.push(tokens, enc.scales[:, sent:]))
            sent = enc.scales.shape[1]
        out.append(dec.flush())
        assert_stream_equal(torch.cat(out, -1), want, "chained")
    with codec.stream_encoder() as enc:  # mono on both channels, as encode() puts it
        mono = noise(1000, 99, channels=1)
        assert torch.equal(torch.cat([enc.push(mono), enc.flush()], -1),
                           codec.encode(mono[0], 48000).tokens)


def assert_stream_equal(got: torch.Tensor, want: torch.Tensor, case) -> None:
    assert got.shape == want.shape, case
    assert (got - want).abs().max() <= SAME_MODEL, case


def test_stream_refusals(codec):
    codes = codec.encode(noise(48500, 3), 48000)
    with codec.stream_decoder() as dec:  # a segment's audio waits for its scale
        assert dec.push(codes.tokens).shape == (1, 2, 0)
        with pytest.raises(CodesError, match="segment 0 has no scale"):
            dec.flush()
    with codec.stream_decoder() as dec:
        with pytest.raises(CodesError, match=r"pushed scales must be floats \[1, segments\]"):
            dec.push(codes.tokens, codes.scales[0])
        with pytest.raises(CodesError, match="NaN or Inf"):
            dec.push(codes.tokens, torch.full((1, 1), float("nan")))
    with codec.stream_encoder() as enc:
        with pytest.raises(AudiotokError, match=r"must be \[1, n\] or \[1, 2, n\]"):
            enc.push(torch.zeros(1, 3, 10))
