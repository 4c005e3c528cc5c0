"""Mimi's language-model token ids (csm, kyutai-stt, moshi), with hand-computed examples."""

import numpy as np
import pytest

from audiotok.export.llm import TokenIdError, scheme_for

SIZES = (2048,) * 32


def tokens(k=32, t=3, seed=0):
    return np.random.default_rng(seed).integers(0, 2048, (k, t))


def test_csm():
    s = scheme_for("csm", SIZES)  # no tokenizer needed
    t = tokens()
    t[:, 1] = 0  # a genuine zero frame inside the audio
    ids = s.to_ids(t)
    assert ids.shape == (4, 32)
    assert ids[0, 0] == t[0, 0] and ids[0, 5] == t[5, 0] + 5 * 2051
    assert ids[2, 31] == t[31, 2] + 31 * 2051 == t[31, 2] + 63581
    assert np.array_equal(ids[3], 2051 * np.arange(32))  # the end-of-audio frame
    assert np.array_equal(s.from_ids(ids), t)
    assert np.array_equal(s.from_ids(ids[:-1]), t)  # a generation cut before its end frame
    assert np.array_equal(s.from_text(s.to_text(t)), t)
    assert s.to_text(t[:, :1]).startswith(f"<|csm_{t[0, 0]}|><|csm_{t[1, 0] + 2051}|>")
    bad = ids.copy()
    bad[1, 3] = 3 * 2051 + 2048  # inside the table, not a code
    with pytest.raises(TokenIdError, match="id 8201 at position 1 is not a code of codebook 3"):
        s.from_ids(bad)
    with pytest.raises(TokenIdError, match="CSM uses all 32 Mimi codebooks, got 8"):
        scheme_for("csm", SIZES[:8])


def test_kyutai_stt():
    s = scheme_for("kyutai-stt", SIZES[:8])
    t = tokens(8)
    ids = s.to_ids(t)
    assert ids.shape == (3, 8)
    assert ids[0, 0] == t[0, 0] + 4001 and ids[1, 7] == t[7, 1] + 4001 + 7 * 2049
    assert s.describe()["pad_id"] == 69569
    assert np.array_equal(s.from_ids(ids), t)
    assert np.array_equal(s.from_text(s.to_text(t)), t)
    bos = ids.copy()
    bos[0, 2] = 4001 + 2 * 2049 + 2048  # the audio BOS is not a code
    with pytest.raises(TokenIdError, match="id 10147 at position 0 is not a code of codebook 2"):
        s.from_ids(bos)
    with pytest.raises(TokenIdError, match="expected Kyutai STT audio columns"):
        s.from_ids(ids.T)


def test_moshi_delays_the_acoustic_codebooks():
    s = scheme_for("moshi", SIZES[:8])
    t = np.arange(8 * 3).reshape(8, 3)
    ids = s.to_ids(t)
    assert ids.tolist()[:2] == [[0, 1, 2, 2048], [2048, 3, 4, 5]]
    assert ids[7].tolist() == [2048, 21, 22, 23]
    assert np.array_equal(s.from_ids(ids), t)
    assert np.array_equal(s.from_text(s.to_text(t)), t)
    late = ids.copy()
    late[3, 0] = 5
    with pytest.raises(TokenIdError, match="delayed codebook 3 starts with 5, not the initial"):
        s.from_ids(late)
    high = ids.copy()
    high[2, 2] = 2048
    with pytest.raises(TokenIdError, match="id 2048 at position 1 is not a code of codebook 2"):
        s.from_ids(high)
    with pytest.raises(TokenIdError, match="takes 1..32 Mimi codebooks of 2048"):
        scheme_for("moshi", (1024,) * 8)
