"""Token statistics on token arrays whose entropy is known, and from a tokenize folder."""

import math

import numpy as np
import pytest

from audiotok.errors import AudiotokError
from audiotok.eval.tokens import TokenCounts, codebook_stats, token_stats, tokens_folder_stats


def test_known_distributions():
    c = TokenCounts([8, 16, 4])
    rng = np.random.default_rng(0)
    # codebook 0: p = 1/2, 1/4, 1/8, 1/8 -> 1.75 bits; codebook 1: all 16 codes equally often;
    # codebook 2: one code only
    book0 = rng.permutation(np.repeat([3, 5, 0, 7], [400, 200, 100, 100]))
    book1 = rng.permutation(np.repeat(np.arange(16), 50))
    tokens = np.stack([book0, book1, np.full(800, 2)])
    c.add(tokens[:, :300])
    c.add(tokens[:, 300:])  # items add up
    stats = token_stats(c, frame_rate=50.0)
    b0, b1, b2 = stats["codebooks"]
    assert b0["entropy_bits"] == pytest.approx(1.75, abs=1e-12)
    assert b0["perplexity"] == pytest.approx(2 ** 1.75)
    assert b0["utilisation"] == 0.5 and b0["used"] == 4
    assert b0["normalised_entropy"] == pytest.approx(1.75 / 3)
    assert b1["entropy_bits"] == pytest.approx(4.0) and b1["utilisation"] == 1.0
    assert b1["perplexity"] == pytest.approx(16) and b1["normalised_entropy"] == pytest.approx(1)
    assert b2["entropy_bits"] == 0 and b2["perplexity"] == 1 and b2["used"] == 1
    assert stats["frames"] == 800
    assert stats["nominal_bitrate"] == pytest.approx(50 * (3 + 4 + 2))
    assert stats["entropy_bitrate"] == pytest.approx(50 * (1.75 + 4))


def test_random_tokens_approach_their_entropy():
    """Samples of a known distribution: the plug-in entropy is close to the true one."""
    p = np.array([0.4, 0.3, 0.2, 0.1])
    h = -(p * np.log2(p)).sum()
    draws = np.random.default_rng(1).choice(4, size=200_000, p=p)
    c = TokenCounts([4])
    c.add(draws[None])
    assert codebook_stats(c.counts[0])["entropy_bits"] == pytest.approx(h, abs=2e-3)


def test_bad_tokens():
    c = TokenCounts([4, 4])
    with pytest.raises(AudiotokError, match="expected \\[2, T\\]"):
        c.add(np.zeros((3, 5), int))
    with pytest.raises(AudiotokError, match="codebook 1: codes outside"):
        c.add(np.array([[0, 1], [2, 4]]))
    with pytest.raises(AudiotokError, match="no tokens"):
        codebook_stats(np.zeros(4, np.int64))


def test_tokenize_folder(tmp_path, s2_codec, corpus):
    """`eval --tokens` reads a tokenize output folder: the same counts as the tokens of each
    item encoded directly."""
    from audiotok.pipeline import tokenize

    tokenize(corpus, s2_codec, tmp_path / "out", workers=0, shard_items=2, progress=False)
    stats = tokens_folder_stats(tmp_path / "out")
    direct = TokenCounts(s2_codec.codebook_sizes)
    files = sorted(p for p in corpus.rglob("*") if p.suffix in (".wav", ".flac"))
    n = 0
    for f in files:
        try:
            codes = s2_codec.encode(f)
        except AudiotokError:
            continue
        direct.add(codes.tokens[0, :, : int(codes.lengths[0])].numpy())
        n += 1
    assert stats["items"] == n
    assert stats["codebooks"] == token_stats(direct, s2_codec.frame_rate)["codebooks"]
    assert stats["frame_rate"] == pytest.approx(s2_codec.frame_rate)
    assert stats["nominal_bitrate"] == pytest.approx(
        s2_codec.frame_rate * sum(math.log2(s) for s in s2_codec.codebook_sizes))
    with pytest.raises(AudiotokError, match="not a tokenize output folder"):
        tokens_folder_stats(tmp_path)
