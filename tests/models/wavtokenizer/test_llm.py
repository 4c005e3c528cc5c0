"""OuteTTS 0.2/0.3's token ids for WavTokenizer codes, read as its own PromptProcessor reads a
model's output."""

import json

import numpy as np
import pytest

from audiotok.export.llm import TokenIdError, scheme_for
from tests.export.test_llm import tokenizer
from tests.models.wavtokenizer import reference

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|text_start|>", "<|text_end|>", "<|audio_start|>",
            "<|audio_end|>", "<|space|>", "<|t_0.32|>", "<|t_0.12|>"]


def test_outetts_v2_ids_are_read_as_outetts_reads_them(tmp_path):
    """<|0|>..<|4099|> added in a shuffled order (ids looked up one by one, not assumed
    consecutive): to_ids/to_text and back; a model output with words and durations between
    the codes read as extract_audio_from_tokens reads it; refusals."""
    order = np.random.default_rng(0).permutation(4100)
    tok = tokenizer(tmp_path / "tokenizer.json", SPECIALS, [f"<|{i}|>" for i in order])
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    s = scheme_for("outetts-v2", (4096,), tmp_path)
    tokens = np.array([[0, 4095, 17, 2048, 5]])
    ids = s.to_ids(tokens)
    assert ids.tolist() == tok.encode(s.to_text(tokens)).ids
    assert s.to_text(tokens) == "<|0|><|4095|><|17|><|2048|><|5|>"
    assert np.array_equal(s.from_ids(ids), tokens)
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    output = ("<|audio_start|>\nhello<|t_0.32|>" + s.to_text(tokens[:, :3]) + "<|space|>\n"
              "world<|t_0.12|>" + s.to_text(tokens[:, 3:]) + "<|4098|><|audio_end|>")
    out_ids = tok.encode(output).ids
    want = reference.prompt_processor(tmp_path).extract_audio_from_tokens(out_ids)
    assert s.from_ids(out_ids).tolist() == [want] == [[*tokens[0].tolist(), 4098]]
    assert s.from_text(output).tolist() == [want]
    with pytest.raises(TokenIdError, match=r"<\|4100\|> is not an OuteTTS code token"):
        s.from_text("<|3|><|4100|>")
    with pytest.raises(TokenIdError, match="outside 0..4095"):
        s.to_ids(np.array([[4096]]))
    with pytest.raises(TokenIdError, match="1 codebook of 4096"):
        scheme_for("outetts-v2", (512,), tmp_path)
    with pytest.raises(TokenIdError, match="reads its ids from the language model's tokenizer"):
        scheme_for("outetts-v2", (4096,))
