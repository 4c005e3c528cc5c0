"""BiCodec at the released size (156 M parameters; a wav2vec2 of XLSR-53's width with narrow
inner layers) against Spark-TTS's code: tokens and audio, and the reach that makes 67-frame
windows exact. The model is built for this module only and freed after it (it is large)."""

from types import SimpleNamespace

import pytest
import torch

import audiotok
from tests.bounds import SAME_MODEL
from tests.models.bicodec import reference
from tests.models.bicodec.test_parity import check, noise


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Spark's BiCodec at the released size, saved with spark-tts-lib's weight-norm spelling,
    and ours loaded from that folder."""
    model, w2v = reference.build(reference.FULL), reference.wav2vec2(reference.FULL)
    folder = reference.save_folder(model, w2v, reference.FULL,
                                   tmp_path_factory.mktemp("bicodec_full"), old_weight_norm=False)
    return SimpleNamespace(ref=model, w2v=w2v, folder=folder,
                           tok=reference.tokenizer(model, w2v), codec=audiotok.load(folder))


def test_released_size_equals_spark(released, tmp_path):
    """The released sizes (156 M parameters; a narrow wav2vec2 of XLSR-53's width), weights
    saved with spark-tts-lib's weight-norm spelling."""
    r = released
    assert r.codec.info()["parameters"] > 150e6
    codes = check(r, noise(16123, 4, level=0.05), tmp_path / "x.wav")
    assert len(set(codes.tokens[0, 0].tolist())) > 20 and len(set(codes.globals[0].tolist())) > 5


def test_windows_of_67_frames_each_side_are_exact_at_the_released_size(released):
    """A window keeping frames [77, 133) of 200, decoded with 67 frames each side, equals the
    whole decode there; with 5 frames each side it does not (with random weights the far
    frames' share fades: 10 frames 1.9e-3 off, 20 frames 5e-7)."""
    codec = released.codec
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 8192, (1, 1, 200), generator=g)
    utterance = torch.randint(0, 4096, (1, 32), generator=g)
    whole = codec.decode(tokens, globals=utterance)[..., 77 * 320 : 133 * 320]
    exact = codec.decode(tokens[..., 10:200], globals=utterance)[..., 67 * 320 : 123 * 320]
    assert (exact - whole).abs().max() <= SAME_MODEL
    short = codec.decode(tokens[..., 72:138], globals=utterance)[..., 5 * 320 : 61 * 320]
    assert (short - whole).abs().max() > 1e-3
