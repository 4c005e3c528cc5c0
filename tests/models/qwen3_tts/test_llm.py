"""The `qwen3-tts` token ids (the talker's 16 ids a step, its end of speech 2150), with
hand-computed examples, round trips in both forms, and refusals."""

import numpy as np
import pytest

from audiotok.export.llm import TokenIdError, scheme_for

SIZES = (2048,) * 16


def test_qwen3_tts_ids():
    s = scheme_for("qwen3-tts", SIZES)  # no tokenizer needed
    t = np.random.default_rng(0).integers(0, 2048, (16, 3))
    t[:, 1] = 0  # code 0 everywhere is a frame like any other
    ids = s.to_ids(t)
    assert ids.shape == (4, 16)
    assert ids[0, 0] == t[0, 0] and ids[2, 15] == t[15, 2]  # codes are their own ids
    assert ids[3].tolist() == [2150] + [0] * 15  # the end of speech
    assert np.array_equal(s.from_ids(ids), t)
    assert np.array_equal(s.from_ids(ids[:-1]), t)  # cut before its end
    after = np.concatenate([ids, ids[:1]])  # rows after the end are not this audio's
    assert np.array_equal(s.from_ids(after), t)
    assert np.array_equal(s.from_text(s.to_text(t)), t)
    assert s.to_text(t[:, :1]) == "".join(f"<|qwen3tts_{int(c)}|>" for c in t[:, 0]) \
        + "<|qwen3tts_2150|>" + "<|qwen3tts_0|>" * 15
    assert s.describe()["eos_id"] == 2150 and s.describe()["talker_vocab"] == 3072
    bad = ids.copy()
    bad[1, 0] = 2149  # the talker's bos: special, not a code
    with pytest.raises(TokenIdError, match="id 2149 at position 1 is not a codebook-0 code"):
        s.from_ids(bad)
    bad = ids.copy()
    bad[0, 7] = 2048
    with pytest.raises(TokenIdError, match="id 2048 at position 0 is not a code of codebook 7"):
        s.from_ids(bad)
    with pytest.raises(TokenIdError, match="take 16 codebooks, got 8"):
        scheme_for("qwen3-tts", SIZES[:8])
    with pytest.raises(TokenIdError, match="not whole steps of 16"):
        s.from_text("<|qwen3tts_5|>")
