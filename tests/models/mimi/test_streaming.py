"""Mimi streams exactly: stream_encoder / stream_decoder equal offline encode / decode for any
push sizes and far past the attention window (the small config's window is 4 frames; a 60 s
stream is 750 frames), where moshi's own streaming drifts from its offline result."""

import numpy as np
import torch

from tests.bounds import AUDIO_PARITY, ROUNDING, SAME_MODEL
from tests.models.mimi.conftest import speechy

FRAME = 1920


def test_a_60_s_stream_pushed_frame_by_frame_equals_offline(mimi_codec):
    x = speechy(FRAME * 750, 1)[0]
    offline = mimi_codec.encode(x, 24000).tokens
    with mimi_codec.stream_encoder(1) as enc:
        tokens = torch.cat([enc.push(x[:, i: i + FRAME]) for i in range(0, x.shape[1], FRAME)]
                           + [enc.flush()], -1)
    assert torch.equal(tokens, offline)
    audio = mimi_codec.decode(offline)
    with mimi_codec.stream_decoder(1) as dec:
        pcm = torch.cat([dec.push(offline[..., f: f + 1]) for f in range(750)]
                        + [dec.flush()], -1)
    assert pcm.shape == audio.shape
    assert (pcm - audio).abs().max() <= SAME_MODEL


def test_pushes_of_any_size(mimi_codec):
    rng = np.random.default_rng(2)
    x = speechy(FRAME * 40 + 1234, 2)[0].expand(2, -1).clone()
    x[1] *= -0.5
    offline = mimi_codec.encode(x[:, None], 24000).tokens
    with mimi_codec.stream_encoder(2) as enc:
        pieces, i = [], 0
        while i < x.shape[1]:
            n = int(rng.integers(1, 3 * FRAME))
            pieces.append(enc.push(x[:, i: i + n]))
            i += n
        pieces.append(enc.flush())
    assert torch.equal(torch.cat(pieces, -1), offline)
    audio = mimi_codec.decode(offline)  # [2, 1, N]: trimmed to the input length
    with mimi_codec.stream_decoder(2) as dec:
        out, f = [], 0
        while f < offline.shape[-1]:
            n = int(rng.integers(1, 9))
            out.append(dec.push(offline[..., f: f + n]))
            f += n
    pcm = torch.cat(out, -1)[..., : audio.shape[-1]]
    assert (pcm - audio).abs().max() <= SAME_MODEL


def test_layer_padding_streams_its_own_last_frame(mimi_files):
    """With padding="layer", flushing a partial frame encodes it as that convention does."""
    import audiotok

    codec = audiotok.load(mimi_files[3], padding="layer")
    x = speechy(FRAME * 9 + 700, 3)[0]
    with codec.stream_encoder(1) as enc:
        tokens = torch.cat([enc.push(x[:, i: i + 1000]) for i in range(0, x.shape[1], 1000)]
                           + [enc.flush()], -1)
    assert torch.equal(tokens, codec.encode(x, 24000).tokens)


def test_moshi_streaming_drifts_where_ours_does_not(mimi_files, mimi_codec):
    """moshi's ring cache holds exactly `context` keys and writes the new ones before
    attending, so once full it drops a key the offline pass sees: its 1-frame streaming differs
    from its own offline result from frame context / 2 on (here 4). Ours stays equal."""
    moshi = mimi_files[0]
    x = speechy(FRAME * 24, 4)
    codes = mimi_codec.encode(x[0], 24000).tokens
    with torch.no_grad():
        assert torch.equal(moshi.encode(x), codes)
        with moshi.streaming(1):
            streamed = torch.cat([moshi.encode(x[..., i: i + FRAME])
                                  for i in range(0, x.shape[-1], FRAME)], -1)
        offline_audio = moshi.decode(codes)
        with moshi.streaming(1):
            streamed_audio = torch.cat([moshi.decode(codes[..., f: f + 1]) for f in range(24)],
                                       -1)
    drift = (streamed_audio - offline_audio).abs().amax(dim=(0, 1)).view(24, FRAME).amax(-1)
    assert drift[:4].max() <= SAME_MODEL < drift[4:].max()
    assert not torch.equal(streamed, codes)
    with mimi_codec.stream_decoder(1) as dec:
        ours = torch.cat([dec.push(codes[..., f: f + 1]) for f in range(24)], -1)
    assert (ours - offline_audio).abs().max() <= AUDIO_PARITY


def test_a_push_looks_its_codes_up_at_once(mimi_codec, monkeypatch):
    """Up to PUSH_FRAMES frames, all levels' codebook rows are looked up and summed at once (a
    lookup per RVQ); the latent is the level-by-level sum's (the references' order, kept
    above) within ROUNDING."""
    from audiotok.models.mimi import quantizer as Q

    rvq = mimi_codec.model.quantizer
    levels = rvq.semantic.levels + rvq.acoustic.levels
    torch.manual_seed(0)
    codes = torch.randint(0, rvq.acoustic.codebook.shape[1], (2, levels, 8))
    lookups = []
    real = Q.F.embedding
    monkeypatch.setattr(Q.F, "embedding", lambda *a, **k: lookups.append(1) or real(*a, **k))
    with torch.inference_mode():
        for k in (1, 2, levels):  # any leading subset of the levels
            monkeypatch.setattr(Q, "PUSH_FRAMES", 16)
            lookups.clear()
            at_once = rvq.decode(codes[:, :k])
            assert len(lookups) == min(k, 2)
            monkeypatch.setattr(Q, "PUSH_FRAMES", 0)
            lookups.clear()
            by_level = rvq.decode(codes[:, :k])
            assert len(lookups) == k
            torch.testing.assert_close(at_once, by_level, atol=ROUNDING, rtol=0)
