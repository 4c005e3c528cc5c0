"""The S3 language models' token ids, both ways: each scheme's layout (start, codes, end),
reading back with markers, cut short or padded, and clear errors for ids that are not speech."""

import numpy as np
import pytest

from audiotok.export.llm import TokenIdError, scheme_for

CODES = np.array([[0, 17, 4095, 9]])


@pytest.mark.parametrize("name, size, head, tail, offset", [
    ("cosyvoice", 4096, [], [4096], 0),
    ("cosyvoice2", 6561, [], [6561], 0),
    ("cosyvoice3", 6561, [6561], [6562], 0),
    ("chatterbox", 6561, [6561], [6562], 0),
    ("step-audio2", 6561, [], [], 151696),
])
def test_layouts_round_trip(name, size, head, tail, offset):
    s = scheme_for(name, (size,))
    ids = s.sequence(CODES)
    assert ids.tolist() == head + (CODES[0] + offset).tolist() + tail
    assert s.from_ids(ids).tolist() == CODES.tolist()
    assert s.from_ids(ids[: len(head) + 2]).tolist() == CODES[:, :2].tolist()  # cut short
    assert s.from_text(s.to_text(CODES)).tolist() == CODES.tolist()
    with pytest.raises(TokenIdError):  # a text id, or past the speech ids
        s.from_ids(np.array([offset - 1 if offset else size + 5000]))
    with pytest.raises(TokenIdError, match="codebook"):
        scheme_for(name, (size, size))


def test_stop_ids_and_padding():
    assert scheme_for("cosyvoice2", (6561,)).from_ids([5, 6, 6563, 7]).tolist() == [[5, 6]]
    assert scheme_for("cosyvoice3", (6561,)).from_ids([6561, 5, 6700]).tolist() == [[5]]
    step = scheme_for("step-audio2", (6561,))
    assert step.from_ids([151696 + 3, 151696 + 6561 + 2, 151696 + 4]).tolist() == [[3, 4]]
    with pytest.raises(TokenIdError):
        step.from_ids([151000])  # a text id


@pytest.mark.parametrize("name, ids, want", [
    ("cosyvoice3", [6561, 5, 6, 6600, 7], [5, 6]),  # sos skipped, any id of 6561..6760 ends
    ("chatterbox", [6561, 0, 6560, 6562], [0, 6560]),
    ("cosyvoice2", [1, 2, 6563], [1, 2]),  # the fill token stops too
])
def test_ids_read_as_they_come(name, ids, want):
    """A server's decode stream reads an LLM's ids one by one (IdReader): markers skipped, the
    first stop ends the input; ids that are not speech refused; Step-Audio 2's padding, of no
    bounded range, is not read that way."""
    from audiotok.export.llm import IdReader

    reader = IdReader(scheme_for(name, (6561,)))
    got = [reader.feed_ids([i]) for i in ids[:-1]]
    got.append(reader.feed_ids(ids[-1:]) if not reader.ended else np.zeros((1, 0), np.int64))
    assert np.concatenate(got, 1).tolist() == [want] and reader.ended
    with pytest.raises(TokenIdError, match="not an id of frame slot"):
        IdReader(scheme_for(name, (6561,))).feed_ids([7000])
    with pytest.raises(TokenIdError, match="one after"):
        IdReader(scheme_for("step-audio2", (6561,)))
