"""The token range check shared by the torch codecs, the ONNX runtime and the engine's streams."""

import numpy as np
import pytest

from audiotok.errors import CodesError
from audiotok.tokencheck import BATCH_PLACE, CLAMP_HINT, within_codebooks

SIZES = [8, 4, 4]  # codebooks of different sizes, as S2's semantic and residual ones


def test_tokens_in_range_come_back_as_given():
    tokens = np.array([[[7, 0], [3, 1], [0, 3]]])
    assert within_codebooks(tokens, SIZES, False, BATCH_PLACE, CLAMP_HINT) is tokens


def test_the_first_token_out_of_range_is_named_with_its_codebooks_range():
    tokens = np.zeros((2, 3, 5), np.int64)
    tokens[1, 2, 3] = 4  # codebook 2 holds 0..3
    tokens[1, 2, 4] = -1
    with pytest.raises(CodesError, match=r"^token 4 at item 1, codebook 2, frame 3 is outside "
                                         r"0\.\.3 \(pass clamp=True to clamp\)$"):
        within_codebooks(tokens, SIZES, False, BATCH_PLACE, CLAMP_HINT)
    with pytest.raises(CodesError, match=r"^token -2 at codebook 0, frame 1 of a push is "
                                         r"outside 0\.\.7 \(hint\)$"):
        within_codebooks(np.array([[0, -2], [0, 0], [0, 9]]), SIZES, False,
                         "codebook {0}, frame {1} of a push", "hint")


def test_clamping_clamps_each_codebook_to_its_own_range():
    tokens = np.array([[9, -3, 5], [4, -1, 2], [100, 3, 0]])
    clamped = within_codebooks(tokens, SIZES, True, BATCH_PLACE, CLAMP_HINT)
    np.testing.assert_array_equal(clamped, [[7, 0, 5], [3, 0, 2], [3, 3, 0]])
    assert tokens[0, 0] == 9  # the caller's array is not changed
