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


def test_http_and_websocket_equal_the_library(spark):
    codec = spark("tiny").codec
    audio = 0.1 * np.random.default_rng(3).standard_normal(16000)
    tokens = np.random.default_rng(4).integers(0, 8192, (1, 30))
    check_served(codec, "spark", audio, tokens, decode="windowed")
