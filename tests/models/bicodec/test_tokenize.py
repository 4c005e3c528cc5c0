"""Tokenizing a corpus with BiCodec: each row's semantic tokens and its 32 global tokens (the
shards' globals column) equal the item encoded alone, and Spark-TTS's training rows (llm_ids)
hold both."""

import numpy as np
import pytest

from audiotok.errors import AudiotokError
from audiotok.export.llm import scheme_for
from audiotok.pipeline import tokenize
from tests.pipeline.conftest import make_corpus, read_output

pytest.importorskip("pyarrow")

GOOD = {"a.wav": (1.3, 16000, 1), "b.flac": (0.4, 16000, 1), "c.wav": (2.2, 16000, 1)}


def test_shards_hold_the_global_tokens(spark, spark_tok, tmp_path):
    codec = spark("tiny").codec
    corpus = make_corpus(tmp_path / "corpus", GOOD, bad=False)
    llm = scheme_for("spark-tts", codec.codebook_sizes, spark_tok[0])
    s = tokenize(corpus, codec, tmp_path / "out", batch_seconds=3.0, shard_items=2, workers=1,
                 progress=False, llm=llm)
    assert (s.tokenized, s.failed) == (3, 0)
    out = read_output(tmp_path / "out")
    assert out["metas"][0]["global_tokens"] == 32
    for name, r in out["rows"].items():
        codes = codec.encode(str(corpus / name))
        tokens = np.asarray(r["tokens"]).reshape(1, -1)
        np.testing.assert_array_equal(tokens, codes.tokens[0].numpy())
        np.testing.assert_array_equal(r["globals"], codes.globals[0].numpy())
        assert r["llm_ids"] == llm.sequence(tokens, codes.globals[0].numpy()).tolist()
    with pytest.raises(AudiotokError, match="cannot hold: tokenize without --npy"):
        tokenize(corpus, codec, tmp_path / "npy", npy=True, progress=False)
