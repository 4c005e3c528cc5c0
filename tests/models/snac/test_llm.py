"""SNAC 24 kHz token ids of Orpheus TTS and Mini-Omni: hand-computed frames, exact round trips
(a code 0 included, which Orpheus's own stream parser drops), and refusals."""

import numpy as np
import pytest

from audiotok.export.llm import IdReader, TokenIdError, scheme_for

SIZES = (4096,) * 7
# one coarse frame: level 0 = 5; level 1 = 6, 7; level 2 = 8, 9, 10, 11 (rows 0, 1-2, 3-6)
FRAME = np.array([[5], [6], [7], [8], [9], [10], [11]])


def test_orpheus_frame_by_hand():
    s = scheme_for("orpheus", SIZES)
    # slots: L0[0], L1[0], L2[0], L2[1], L1[1], L2[2], L2[3]; id = 128266 + 4096 slot + code
    want = [128271, 132368, 136466, 140563, 144657, 148756, 152853]
    assert s.to_ids(FRAME).tolist() == want
    assert s.to_text(FRAME) == ("<custom_token_15><custom_token_4112><custom_token_8210>"
                                "<custom_token_12307><custom_token_16401><custom_token_20500>"
                                "<custom_token_24597>")
    assert np.array_equal(s.from_ids(want), FRAME)


def test_orpheus_round_trips_with_code_zero_and_refuses_the_rest():
    s = scheme_for("orpheus", SIZES)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 4096, (7, 9))
    tokens[0, 0] = 0  # a genuine code 0 in slot 0
    tokens[:, 4] = 4095
    assert np.array_equal(s.from_ids(s.to_ids(tokens)), tokens)
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    assert np.array_equal(s.from_text(" " + s.to_text(tokens) + "\n"), tokens)
    ids = s.to_ids(tokens)
    with pytest.raises(TokenIdError, match="not whole frames of 7"):
        s.from_ids(ids[:-1])
    for bad, where in ((128258, 0), (128266 + 4096, 0), (128266 + 4096 * 7, 6), (-1, 3)):
        wrong = ids.copy()
        wrong[where] = bad
        with pytest.raises(TokenIdError, match=f"slot {where}"):
            s.from_ids(wrong)
    with pytest.raises(TokenIdError, match="unexpected text"):
        s.from_text("<custom_token_15> hello")
    with pytest.raises(TokenIdError, match="7 rows of 4096"):
        scheme_for("orpheus", (4096,) * 15)


def test_mini_omni_heads_by_hand_and_round_trips():
    s = scheme_for("mini-omni", SIZES)
    heads = s.to_ids(FRAME)
    assert heads.shape == (7, 9)
    pad, eoa = 4097, 4096
    assert (heads[0] - 152000).tolist() == [pad, 5, eoa, pad, pad, pad, pad, pad, pad]
    assert (heads[4] - 152000 - 4 * 4160).tolist() == [pad] * 5 + [7, eoa, pad, pad]
    assert (heads[6] - 152000 - 6 * 4160).tolist() == [pad] * 7 + [11, eoa]
    assert s.describe()["delays"] == [1, 2, 3, 4, 5, 6, 7]
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 4096, (7, 11))
    tokens[:, 0] = 0
    assert np.array_equal(s.from_ids(s.to_ids(tokens)), tokens)
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    # as generation leaves it (reconscruct_snac): no end of audio, T = S - 7
    assert np.array_equal(s.from_ids(s.to_ids(tokens)[:, :-1]), tokens)
    wrong = s.to_ids(tokens)
    wrong[2, 5] = 152000  # head 0's range in head 2
    with pytest.raises(TokenIdError, match="head 2"):
        s.from_ids(wrong)
    with pytest.raises(TokenIdError, match=r"\[7, S >= 7\]"):
        s.from_ids(np.zeros((6, 9), np.int64))


def read_all(reader, pieces, kind):
    feed = reader.feed_ids if kind == "ids" else reader.feed_text
    return np.concatenate([feed(p) for p in pieces], 1)


def test_id_reader_takes_an_orpheus_stream_in_any_pieces():
    s = scheme_for("orpheus", SIZES)
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 4096, (7, 6))
    tokens[:, 1] = 0  # every slot's code 0: Orpheus's own parser loses these frames
    ids = s.to_ids(tokens)
    stream = np.concatenate([[s.START_OF_SPEECH], ids, ids[:3], [s.END_OF_SPEECH]])
    # one id at a time: a frame comes out when its 7th id does
    reader = IdReader(s)
    outs = [reader.feed_ids([i]) for i in stream]
    assert [o.shape[1] for o in outs].count(1) == 6 and sum(o.shape[1] for o in outs) == 6
    assert np.array_equal(np.concatenate(outs, 1), tokens)
    assert reader.ended and reader.finish() == 3  # the incomplete last frame is dropped
    with pytest.raises(TokenIdError, match="after the end of speech"):
        reader.feed_ids([ids[0]])
    # text cut anywhere, tokens split across pieces
    text = "<custom_token_1>" + s.to_text(tokens)
    cuts = sorted(rng.choice(len(text), 40, replace=False))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    reader = IdReader(s)
    assert np.array_equal(read_all(reader, pieces, "text"), tokens)
    assert not reader.ended and reader.finish() == 0


def test_id_reader_refusals():
    s = scheme_for("orpheus", SIZES)
    ids = s.to_ids(FRAME)
    reader = IdReader(s)
    reader.feed_ids(ids[:3])
    wrong = ids[3:].copy()
    wrong[1] = 128009  # <|eot_id|> inside a frame: slot 4 of speech id 4
    with pytest.raises(TokenIdError, match=r"128009 \(speech id 4 of the stream\) is not an "
                       r"id of frame slot 4 \(144650..148745\)"):
        reader.feed_ids(wrong)
    with pytest.raises(TokenIdError, match="not a <custom_token_N>"):
        IdReader(s).feed_text("<custom_token_15><|eot_id|>")
    reader = IdReader(s)
    reader.feed_text("<custom_token_15><custom_tok")
    with pytest.raises(TokenIdError, match="not a whole token"):
        reader.finish()
    with pytest.raises(TokenIdError, match="without a complete token"):
        IdReader(s).feed_text("x" * 300)
    with pytest.raises(TokenIdError, match="cannot be read as they come"):
        IdReader(scheme_for("mini-omni", SIZES))
    with pytest.raises(TokenIdError, match="cannot be read as they come"):
        IdReader(scheme_for("generic", (8, 8), delay=True))


def test_id_reader_reads_generic_frame_major_ids():
    s = scheme_for("generic", (8, 16), offset=100)
    tokens = np.array([[1, 0, 7], [15, 2, 0]])
    reader = IdReader(s)
    got = read_all(reader, [[101, 123], [100], [110, 107], [108]], "ids")
    assert np.array_equal(got, tokens)
