"""BiCodec streamed and served: the detokenizer reaches 67 frames each side (the prenet's
convolutions and the wave generator), so windows of 67 frames' context each side give the
offline decode exactly and shorter ones do not; the library's stream and the server's HTTP and
WebSocket routes carry the 32 global tokens and equal the library's offline results."""

import numpy as np
import pytest
import torch

from audiotok.errors import AudiotokError, CodesError
from tests.bounds import SAME_MODEL

pytest.importorskip("fastapi")
from tests.helpers import check_served, stream_decoded  # noqa: E402


def test_stream_decoder_equals_offline(spark):
    codec = spark("tiny").codec
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 8192, (2, 1, 90), generator=g)
    utterance = torch.randint(0, 4096, (2, 32), generator=g)
    whole = codec.decode(tokens, globals=utterance)
    assert whole.shape == (2, 1, 90 * 320)
    for sizes in ([1] * 90, [5, 1, 40, 44]):
        got = stream_decoded(codec, tokens, sizes, globals=utterance)
        assert got.shape == whole.shape and (got - whole).abs().max() <= SAME_MODEL
    with pytest.raises(CodesError, match="32 global tokens"):
        codec.stream_decoder(1)
    with pytest.raises(AudiotokError, match="takes no voice"):
        codec.stream_decoder(1, voice="x", globals=utterance[:1])


def test_windows_of_67_frames_each_side_are_exact_at_the_released_size(spark):
    """A window keeping frames [77, 133) of 200, decoded with 67 frames each side, equals the
    whole decode there; with 5 frames each side it does not (with random weights the far
    frames' share fades: 10 frames 1.9e-3 off, 20 frames 5e-7)."""
    codec = spark("full").codec
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 8192, (1, 1, 200), generator=g)
    utterance = torch.randint(0, 4096, (1, 32), generator=g)
    whole = codec.decode(tokens, globals=utterance)[..., 77 * 320 : 133 * 320]
    exact = codec.decode(tokens[..., 10:200], globals=utterance)[..., 67 * 320 : 123 * 320]
    assert (exact - whole).abs().max() <= SAME_MODEL
    short = codec.decode(tokens[..., 72:138], globals=utterance)[..., 5 * 320 : 61 * 320]
    assert (short - whole).abs().max() > 1e-3


def test_http_and_websocket_equal_the_library(spark):
    codec = spark("tiny").codec
    audio = 0.1 * np.random.default_rng(3).standard_normal(16000)
    tokens = np.random.default_rng(4).integers(0, 8192, (1, 30))
    check_served(codec, "spark", audio, tokens, decode="windowed")
