"""Spark-TTS's token ids for BiCodec codes (the spark-tts scheme), checked against how Spark-TTS
writes its prompts and reads a model's output (SparkTTS.py: the bicodec tokens as text, its
regexes over the decoded text)."""

import re

import numpy as np
import pytest

from audiotok.export.llm import TokenIdError, scheme_for


def spark_reads(tok, ids) -> tuple[list[int], list[int]]:
    """(semantic, global) tokens as SparkTTS.inference reads a model's output."""
    text = tok.decode(list(ids), skip_special_tokens=True)
    return ([int(t) for t in re.findall(r"bicodec_semantic_(\d+)", text)],
            [int(t) for t in re.findall(r"bicodec_global_(\d+)", text)])


def test_spark_ids_both_ways(spark_tok):
    path, tok = spark_tok
    s = scheme_for("spark-tts", (8192,), path)
    rng = np.random.default_rng(1)
    tokens, utterance = rng.integers(0, 8192, (1, 40)), rng.integers(0, 4096, 32)
    tokens[0, :2] = (0, 8191)
    utterance[:2] = (0, 4095)
    # Spark's prompt text (process_prompt) tokenizes to our ids
    prompt = "".join(f"<|bicodec_global_{i}|>" for i in utterance) + \
        "".join(f"<|bicodec_semantic_{i}|>" for i in tokens[0])
    assert s.to_text(tokens, utterance) == prompt
    assert s.to_ids(tokens, utterance).tolist() == tok.encode(prompt).ids
    assert s.to_ids(tokens).tolist() == tok.encode(prompt).ids[32:]
    row = s.sequence(tokens, utterance)
    cut = prompt.index("<|bicodec_semantic")  # (a fine-tuning row's speech part)
    assert row.tolist() == tok.encode(
        "<|start_global_token|>" + prompt[:cut] + "<|end_global_token|><|start_semantic_token|>"
        + prompt[cut:] + "<|end_semantic_token|>").ids
    # a model's output with text and markers between: read as Spark reads it
    mid = prompt.index("<|bicodec", 200)
    output = tok.encode("hello <|task_tts|>" + prompt[:mid] + " world" + prompt[mid:] +
                        "<|im_end|>").ids
    semantic, glob = spark_reads(tok, output)
    got, got_globals = s.split_ids(output)
    assert got.tolist() == [semantic] == tokens.tolist()
    assert got_globals.tolist() == glob == utterance.tolist()
    assert np.array_equal(s.from_ids(output), tokens)
    text_tokens, text_globals = s.split_text(tok.decode(output, skip_special_tokens=False))
    assert np.array_equal(text_tokens, tokens) and np.array_equal(text_globals, utterance)
    assert s.split_ids(s.to_ids(tokens))[1] is None  # semantic tokens only
    with pytest.raises(TokenIdError, match="32 global tokens, the ids hold 31"):
        s.split_ids(s.to_ids(tokens, utterance)[1:])
    with pytest.raises(TokenIdError, match="outside 0..8191"):
        s.to_ids(np.array([[8192]]))
    with pytest.raises(TokenIdError, match="outside 0..4095"):
        s.to_ids(tokens, np.full(32, 4096))
    with pytest.raises(TokenIdError, match="32 global tokens an utterance"):
        s.to_ids(tokens, utterance[:5])
    with pytest.raises(TokenIdError, match="is not a BiCodec token"):
        s.split_text("<|bicodec_global_5000|>")
    with pytest.raises(TokenIdError, match="1 codebook of 8192"):
        scheme_for("spark-tts", (4096,), path)
    with pytest.raises(TokenIdError, match="reads its ids from the language model's tokenizer"):
        scheme_for("spark-tts", (8192,))
