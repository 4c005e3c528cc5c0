"""EnCodec 24 kHz streams: the stateful decoder stream (reflection at the start, each layer's
context, the LSTM state, the transposed convolutions' frames) equals the offline decode for any
pushes and lengths, short ones included, with the first audio once 7 frames are in; the engine's
streams under random schedules equal their offline decodes."""

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

import audiotok
from audiotok.models.encodec.codec import EncodecCodec
from audiotok.models.encodec.config import EncodecConfig
from audiotok.models.encodec.model import EncodecModel
from audiotok.server import Engine, EngineSettings
from tests.server.schedules import run_decode_schedule
from tests.server.test_engine import CORNERS, schedules

SMALL = EncodecConfig(n_filters=4, dimension=16, bins=64, lstm=1,
                      target_bandwidths=(0.75, 1.5))  # 2 codebooks of 64


@pytest.fixture(scope="module")
def small_codec():
    torch.manual_seed(0)
    model = EncodecModel(SMALL)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape))
        model.quantizer.embed.copy_(torch.randn(model.quantizer.embed.shape))
    codec = EncodecCodec(model.eval())
    assert codec.codebook_sizes == (64, 64)
    return codec


def streamed(codec, tokens, sizes):
    pieces, sent, first = [], 0, None
    with codec.stream_decoder(tokens.shape[0]) as dec:
        for n in sizes:
            pieces.append(dec.push(tokens[..., sent : sent + n]))
            sent += n
            if first is None and pieces[-1].shape[-1]:
                first = sent
        pieces.append(dec.flush())
    assert sent == tokens.shape[-1]
    return torch.cat(pieces, -1), first


def test_stream_decoder_equals_offline(enc_ref):
    codec = audiotok.load(enc_ref.th, bandwidth="6")
    g = torch.Generator().manual_seed(1)
    for frames, plans in ((1, [[1]]), (6, [[1] * 6, [4, 2]]), (7, [[1] * 7, [7]]),
                          (40, [[1] * 40, [2, 5, 1, 32], [40]])):
        tokens = torch.randint(0, 1024, (2, 8, frames), generator=g)
        whole = codec.decode(tokens)
        for sizes in plans:
            got, first = streamed(codec, tokens, sizes)
            assert got.shape == whole.shape, (frames, sizes)
            assert (got - whole).abs().max() <= 1e-5, (frames, sizes)
            if frames >= 7 and sizes[0] == 1:
                assert first == 7  # the first convolution's reflection needs 7 frames


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[1])
def test_engine_decode_streams_equal_offline(small_codec, plan):
    """Stateful streams in the engine (several as one batch once their states match), ragged
    pushes, streams opening at random steps; each equals its offline decode."""
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"encodec": small_codec}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    assert engine.models["encodec"].runners["decode"].mode == "stateful"
    run_decode_schedule(engine, small_codec, streams, seed, name="encodec")
