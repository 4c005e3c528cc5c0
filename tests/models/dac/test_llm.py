"""DAC's language-model token layouts, `dia` and `parler`: hand-computed examples from the
sources' own comments and formulas, exact round trips (codes 0 and 1023 included), and refusals
with the place of the bad id."""

import numpy as np
import pytest

from audiotok.export.llm import TokenIdError, scheme_for

B_DIA, P_DIA, E_DIA = 1026, 1025, 1024
B_PAR, E_PAR = 1025, 1024


def test_parler_labels_are_the_training_scripts():
    """Parler-TTS's label preparation, drawn in its comment for 4 codebooks, 2 frames:
    [B, a, b, E, E, E, E] / [B, B, c, d, E, E, E] / ... with the first (all-BOS) step dropped."""
    s = scheme_for("parler", (1024,) * 4)
    a, b, c, d, e, f, g, h = 11, 12, 13, 14, 15, 16, 0, 1023
    tokens = np.array([[a, b], [c, d], [e, f], [g, h]])
    want = np.array([[a, b, E_PAR, E_PAR, E_PAR, E_PAR],
                     [B_PAR, c, d, E_PAR, E_PAR, E_PAR],
                     [B_PAR, B_PAR, e, f, E_PAR, E_PAR],
                     [B_PAR, B_PAR, B_PAR, g, h, E_PAR]])
    assert np.array_equal(s.to_ids(tokens), want)
    assert np.array_equal(s.from_ids(want), tokens)
    assert np.array_equal(s.sequence(tokens), want.T.reshape(-1))
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    bad = want.copy()
    bad[1, 0] = 5  # a code where the delay pattern has BOS
    with pytest.raises(TokenIdError, match="codebook 1, step 0: the delay pattern has 1025"):
        s.from_ids(bad)
    bad = want.copy()
    bad[2, 3] = 1024  # EOS in a code's place
    with pytest.raises(TokenIdError, match="codebook 2, step 3 is not a code"):
        s.from_ids(bad)
    with pytest.raises(TokenIdError, match="1024 codes per codebook"):
        scheme_for("parler", (2048,) * 4)


def test_dia_channels_follow_apply_audio_delay():
    """out[t, c] = in[t - delay_c, c] over [BOS row, codes] (BOS where t - delay_c < 0), then
    each channel's EOS and PAD: for 2 frames, channel 0 (delay 0), 1 (8) and 8 (15)."""
    s = scheme_for("dia", (1024,) * 9)
    tokens = np.arange(18).reshape(9, 2)
    tokens[0] = (0, 1023)
    ids = s.to_ids(tokens)
    assert ids.shape == (9, 2 + 17)
    assert ids[0].tolist() == [B_DIA, 0, 1023, E_DIA] + [P_DIA] * 15
    assert ids[1].tolist() == [B_DIA] * 9 + [2, 3, E_DIA] + [P_DIA] * 7
    assert ids[8].tolist() == [B_DIA] * 16 + [16, 17, E_DIA]
    assert np.array_equal(s.from_ids(ids), tokens)
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)


def test_dia_back_as_its_generate_output_reverts():
    """Dia's _generate_output: the generated steps after the BOS step, reverted by gathering
    step min(t + delay_c, S - 1) of channel c, the last 15 rows dropped, ids outside 0..1023
    made 0, the first T kept (T ending at channel 0's EOS)."""
    s = scheme_for("dia", (1024,) * 9)
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 1024, (9, 40))
    ids = s.to_ids(tokens)
    gen = ids[:, 1:].T  # [S - 1, 9], as Dia keeps generated_tokens from step 1
    steps = gen.shape[0]
    delays = np.array(s.DELAYS)
    rows = np.minimum(np.arange(steps)[:, None] + delays[None, :], steps - 1)
    reverted = gen[rows, np.arange(9)[None, :]][:-15]
    reverted = np.where((reverted < 0) | (reverted > 1023), 0, reverted)
    length = int(np.flatnonzero(ids[0, 1:] == E_DIA)[0])
    assert np.array_equal(reverted[:length].T, tokens)
    assert np.array_equal(s.from_ids(ids), tokens)
    cut = ids[:, :30]  # generation stopped before any EOS: every complete frame
    assert np.array_equal(s.from_ids(cut), tokens[:, : 30 - 16])


def test_dia_refusals_and_clamp():
    s = scheme_for("dia", (1024,) * 9)
    tokens = np.zeros((9, 5), np.int64)
    ids = s.to_ids(tokens)
    bad = ids.copy()
    bad[3, 1 + 10 + 2] = 1025  # channel 3 (delay 10), frame 2
    with pytest.raises(TokenIdError, match="id 1025 at channel 3, step 13 is not a code"):
        s.from_ids(bad)
    assert s.from_ids(bad, clamp=True)[3, 2] == 0
    with pytest.raises(TokenIdError, match="starts with the BOS step"):
        s.from_ids(ids[:, 1:])
    with pytest.raises(TokenIdError, match=r"expected Dia channels \[9, S >= 16\]"):
        s.from_ids(ids[:8])
    with pytest.raises(TokenIdError, match="9 codebooks of 1024"):
        scheme_for("dia", (1024,) * 12)


OUTETTS_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|text_start|>", "<|text_end|>",
                    "<|audio_start|>", "<|audio_end|>", "<|word_start|>", "<|word_end|>",
                    "<|features|>", "<|code|>", "<|t_0.32|>", "<|energy_5|>"]


def test_outetts_ids_are_read_as_outetts_reads_them(tmp_path):
    """OuteTTS 1.0's ids (a tokenizer built here with its special tokens, then <|c1_0..1024|>
    and <|c2_0..1024|>): to_ids/to_text frame by frame and back; a model output with words and
    features between the frames, and a c1 without its c2 at the end, read as its own
    PromptProcessor.extract_audio_from_tokens reads it; refusals."""
    import json

    from tests.export.test_llm import tokenizer
    from tests.models.dac import outetts_reference

    speech = [f"<|c{b}_{i}|>" for b in (1, 2) for i in range(1025)]
    tok = tokenizer(tmp_path / "tokenizer.json", OUTETTS_SPECIALS, speech)
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    s = scheme_for("outetts", (1024, 1024), tmp_path)
    assert s.describe()["c1_first_id"] == tok.token_to_id("<|c1_0|>")
    tokens = np.array([[0, 1023, 5, 77], [1023, 0, 9, 500]])
    ids = s.to_ids(tokens)
    assert ids.tolist() == tok.encode(s.to_text(tokens)).ids
    assert s.to_text(tokens).startswith("<|c1_0|><|c2_1023|><|c1_1023|><|c2_0|>")
    assert np.array_equal(s.from_ids(ids), tokens)
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    output = ("<|word_start|>hello<|features|><|t_0.32|><|energy_5|><|code|>"
              + s.to_text(tokens[:, :2]) + "<|word_end|>\n<|word_start|>world<|code|>"
              + s.to_text(tokens[:, 2:]) + "<|c1_1024|><|word_end|>")
    out_ids = tok.encode(output).ids
    want = outetts_reference.prompt_processor(tmp_path).extract_audio_from_tokens(out_ids)
    assert s.from_ids(out_ids).tolist() == want == tokens.tolist()
    assert s.from_text(output).tolist() == want
    with pytest.raises(TokenIdError, match=r"<\|c2_1025\|> is not an OuteTTS code token"):
        s.from_text("<|c1_3|><|c2_1025|>")
    with pytest.raises(TokenIdError, match="2 codebooks of 1024"):
        scheme_for("outetts", (1024,) * 9, tmp_path)
    with pytest.raises(TokenIdError, match="reads its ids from the language model's tokenizer"):
        scheme_for("outetts", (1024, 1024))
