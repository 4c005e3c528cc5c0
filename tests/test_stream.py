"""Exact streaming (S2): any partition of the tokens or audio gives the offline result."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audiotok.errors import AudioError, AudiotokError, CodesError
from audiotok.nn.transformer import KVRing

TOL = 1e-5


def partition(total: int, sizes: list[int]) -> list[tuple[int, int]]:
    out, start, i = [], 0, 0
    while start < total:
        n = sizes[i % len(sizes)]
        out.append((start, min(total, start + n)))
        start += n
        i += 1
    return out


@pytest.fixture(scope="module")
def tokens3(s2_golden):
    """A batch of 3 token sequences of 60 frames."""
    rng = np.random.default_rng(0)
    t = np.stack([s2_golden["codes_132377"][:, :60], s2_golden["random_codes"][:, :40].repeat(
        2, axis=1)[:, :60], rng.integers(0, 64, (10, 60))])
    t[2, 0] = rng.integers(0, 256, 60)
    return torch.from_numpy(t)


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(max_examples=12, **SETTINGS)
@given(sizes=st.lists(st.integers(1, 12), min_size=1, max_size=6), batch=st.sampled_from([1, 3]))
def test_decoder_any_partition_equals_offline(s2_codec, tokens3, sizes, batch):
    tokens = tokens3[:batch]
    offline = s2_codec.decode(tokens)
    with s2_codec.stream_decoder(batch_size=batch) as dec:
        pieces = []
        for a, b in partition(tokens.shape[-1], sizes):
            pcm = dec.push(tokens[..., a:b])
            assert pcm.shape == (batch, 1, 2048 * (b - a)) and pcm.dtype == torch.float32
            pieces.append(pcm)
        tail = dec.flush()
    assert tail.shape == (batch, 1, 0)
    assert (torch.cat(pieces, -1) - offline).abs().max() <= TOL


def test_decoder_matches_golden_frame_by_frame(s2_codec, s2_golden):
    codes = torch.from_numpy(s2_golden["codes_352805"])[None]
    with s2_codec.stream_decoder() as dec:
        pcm = torch.cat([dec.push(codes[..., i : i + 1]) for i in range(codes.shape[-1])], -1)
    assert np.abs(pcm[0, 0].numpy() - s2_golden["decoded_352805"]).max() <= 1e-4


@settings(max_examples=8, **SETTINGS)
@given(sizes=st.lists(st.integers(300, 9000), min_size=1, max_size=5))
def test_encoder_any_partition_equals_offline(s2_codec, s2_golden, sizes):
    audio = torch.from_numpy(s2_golden["audio_132377"])[None]
    with s2_codec.stream_encoder(batch_size=1) as enc:
        tokens = []
        for a, b in partition(audio.shape[-1], sizes):
            t = enc.push(audio[:, a:b])
            assert t.shape[:2] == (1, 10) and t.dtype == torch.long
            tokens.append(t)
        tokens.append(enc.flush())
    np.testing.assert_array_equal(torch.cat(tokens, -1)[0].numpy(), s2_golden["codes_132377"])


def test_encoder_emits_a_frame_as_soon_as_it_is_complete(s2_codec, s2_golden):
    audio = torch.from_numpy(s2_golden["audio_30000"])[None]
    with s2_codec.stream_encoder() as enc:
        assert enc.push(audio[:, :2047]).shape[-1] == 0
        assert enc.push(audio[:, 2047:2048]).shape[-1] == 1
        assert enc.push(audio[:, 2048:6200]).shape[-1] == 2
        rest = enc.push(audio[:, 6200:])
        last = enc.flush()
    assert last.shape[-1] == 1  # 30000 = 14 whole frames + a partial one
    codes = torch.cat([enc_tokens for enc_tokens in (rest, last)], -1)
    assert codes.shape[-1] == 15 - 3


def test_encoder_batch_of_three(s2_codec, s2_golden):
    audio = torch.from_numpy(np.stack([s2_golden[f"audio_{n}"][:30000]
                                       for n in (30000, 132377, 352805)]))
    offline = s2_codec.encode(audio[:, None])
    with s2_codec.stream_encoder(batch_size=3) as enc:
        tokens = [enc.push(audio[:, i : i + 7000]) for i in range(0, 30000, 7000)]
        tokens.append(enc.flush())
    assert torch.equal(torch.cat(tokens, -1), offline.tokens)


def test_state_stays_bounded(s2_codec):
    """Keys/values never exceed the window; conv contexts keep their size: endless streams fit."""
    window = s2_codec.config.rvq_transformer.window_size
    with s2_codec.stream_decoder() as dec:
        for _ in range(3):
            dec.push(torch.zeros(1, 10, 2 * window, dtype=torch.long))
            sizes = {name: tuple(v.shape) for name, v in _state_tensors(dec.streamer)}
        for name, shape in sizes.items():
            if name.endswith(".k") or name.endswith(".v"):
                assert shape[2] == KVRing.size_for(window) < window + 32, name
        before = sizes
        dec.push(torch.zeros(1, 10, 5, dtype=torch.long))
        assert {n: tuple(v.shape) for n, v in _state_tensors(dec.streamer)} == before
        model = dec.streamer.model
    # the state is dropped at the end, and the stream's copy of the model handed back for reuse
    assert all(m.state is None and not m.streaming for m in model.modules()
               if hasattr(m, "streaming"))
    assert dec.streamer is None
    with s2_codec.stream_decoder() as again:
        assert again.streamer.model is model


def _state_tensors(streamer):
    """(module.field name, tensor) of every state a layers stream holds."""
    names = {m: n for n, m in streamer.model.named_modules()}
    for module, state in zip(streamer.table.modules, streamer.table.rows, strict=True):
        for key, value in state.named_tensors():
            yield f"{names[module]}.{key}", value


def test_streams_do_not_disturb_offline_calls_or_each_other(s2_codec, s2_golden):
    codes = torch.from_numpy(s2_golden["random_codes"])[None]
    offline = s2_codec.decode(codes)
    with s2_codec.stream_decoder() as a, s2_codec.stream_decoder() as b:
        first = a.push(codes[..., :20])
        assert torch.equal(s2_codec.decode(codes), offline)
        other = b.push(codes[..., :40])
        second = a.push(codes[..., 20:])
    assert (torch.cat([first, second], -1) - offline).abs().max() <= TOL
    assert (other - offline).abs().max() <= TOL


def test_bad_pushes(s2_codec):
    with s2_codec.stream_decoder(batch_size=2) as dec:
        with pytest.raises(CodesError, match=r"\[2, 10, t\]"):
            dec.push(torch.zeros(1, 10, 3, dtype=torch.long))
        with pytest.raises(CodesError, match="integers"):
            dec.push(torch.zeros(2, 10, 3))
        bad = torch.zeros(2, 10, 3, dtype=torch.long)
        bad[1, 4, 2] = 64
        with pytest.raises(CodesError, match="item 1, codebook 4, frame 2"):
            dec.push(bad)
    with s2_codec.stream_decoder(batch_size=2, clamp=True) as dec:
        assert dec.push(bad).shape == (2, 1, 3 * 2048)
    with s2_codec.stream_encoder() as enc:
        with pytest.raises(AudioError, match=r"\[1, n\]"):
            enc.push(torch.zeros(100))
        with pytest.raises(AudioError, match="NaN"):
            enc.push(torch.full((1, 10), float("nan")))
    dec = s2_codec.stream_decoder()
    with pytest.raises(RuntimeError, match="with"):
        dec.push(torch.zeros(1, 10, 1, dtype=torch.long))
    with pytest.raises(AudiotokError, match="window= does not apply"):
        s2_codec.stream_decoder(window=(1, 1))


def test_xcodec2_cannot_stream(xc_codec):
    with pytest.raises(AudiotokError, match="not causal"):
        xc_codec.stream_decoder()


@pytest.mark.parametrize("chunk", [3, 32])
def test_chunked_offline_paths_equal_whole(s2_codec, s2_golden, chunk):
    """Long inputs go through the streaming path in pieces; pieces of any size give the same."""
    codes = torch.from_numpy(s2_golden["codes_352805"])[None]
    saved = s2_codec.streaming
    try:
        s2_codec.streaming = replace(saved, pieces=None)
        whole = s2_codec.decode(codes)
        s2_codec.streaming = replace(saved, pieces=chunk)
        assert (s2_codec.decode(codes) - whole).abs().max() <= TOL
        tokens = s2_codec.encode(s2_golden["audio_352805"]).tokens
        np.testing.assert_array_equal(tokens[0].numpy(), s2_golden["codes_352805"])
    finally:
        s2_codec.streaming = saved


def test_encode_file_in_blocks_equals_encode(tmp_path, s2_codec, s2_golden):
    import soundfile as sf

    from audiotok.streaming.files import encode_file

    rng = np.random.default_rng(3)
    stereo = np.stack([s2_golden["audio_352805"], rng.standard_normal(352805) * 0.05]).T
    sf.write(tmp_path / "a.flac", stereo.astype(np.float32), 22050, subtype="PCM_24")
    blocks = encode_file(s2_codec, tmp_path / "a.flac", block_seconds=0.3)
    whole = s2_codec.encode(tmp_path / "a.flac")
    assert torch.equal(blocks.tokens, whole.tokens)
    assert blocks.num_samples.tolist() == whole.num_samples.tolist()
    assert blocks.meta["source_sample_rate"] == [22050]


def test_decode_to_file_equals_decode(tmp_path, s2_codec, s2_golden):
    import soundfile as sf

    from audiotok.streaming.files import decode_to_file

    codes = s2_codec.encode(s2_golden["audio_132377"])
    n = decode_to_file(s2_codec, codes, tmp_path / "a.wav", "FLOAT", push_frames=5)
    audio, rate = sf.read(tmp_path / "a.wav", dtype="float32")
    assert n == audio.size == 132377 and rate == 44100
    assert np.abs(audio - s2_codec.decode(codes)[0, 0].numpy()).max() <= TOL
