"""The Qwen3-TTS tokenizer streams exactly: the decoder (causal end to end: convolution
contexts, transposed-convolution tails, a 72-step key ring per layer) pushed frame by frame for
60 s equals one offline pass; the encoder with attention="window" (Mimi's 250-step window)
equals the offline encode, a ragged last frame included (each convolution pads the stream's end
as the reference's MimiModel pads it); full attention keeps every past step, so its encoder does
not stream (a clear refusal). The serving engine: decode streams under random schedules and
encode streams of whole frames equal the offline results."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings

import audiotok
from audiotok.errors import AudiotokError
from audiotok.server import Engine, EngineSettings
from audiotok.server.errors import EngineError
from tests.bounds import SAME_MODEL
from tests.server.schedules import run_decode_schedule, run_encode_streams
from tests.server.test_engine import CORNERS, schedules

FRAME = 1920


@pytest.fixture(scope="module")
def codecs(qwen_small):
    model = qwen_small[1]["model"]
    return audiotok.load(model), audiotok.load(model, attention="window")


def test_a_60_s_stream_pushed_frame_by_frame_equals_offline(codecs):
    codec = codecs[0]
    codes = torch.randint(0, 2048, (1, 16, 750), generator=torch.Generator().manual_seed(1))
    offline = codec.decode(codes)
    rng = np.random.default_rng(2)
    for pushes in ([1], rng.integers(1, 12, 200).tolist()):
        out, at, i = [], 0, 0
        with codec.stream_decoder() as dec:
            while at < 750:
                out.append(dec.push(codes[..., at : at + pushes[i % len(pushes)]]))
                at, i = at + pushes[i % len(pushes)], i + 1
            out.append(dec.flush())
        audio = torch.cat(out, -1)
        assert audio.shape == offline.shape == (1, 1, 750 * FRAME)
        assert (audio - offline).abs().max() <= SAME_MODEL


def test_window_attention_streams_its_encoder(codecs):
    full, window = codecs
    g = torch.Generator().manual_seed(3)
    for n in (700, FRAME * 9, FRAME * 9 + 700, 24000 * 12 + 77):  # (12 s: past the window)
        x = 0.2 * torch.randn(1, n, generator=g)
        offline = window.encode(x[0], 24000).tokens
        for push in (1000, FRAME) if n < 24000 else (5 * FRAME + 1,):
            with window.stream_encoder() as enc:
                tokens = [enc.push(x[:, i : i + push]) for i in range(0, n, push)]
                tokens.append(enc.flush())
            assert torch.equal(torch.cat(tokens, -1), offline), (n, push)
    with pytest.raises(AudiotokError, match="attention='window' only"):
        full.stream_encoder()
    with pytest.raises(EngineError, match="cannot encode a stream .*no bounded encoder state"):
        Engine({"q": full}, start=False).open_encode_stream("q")


@settings(max_examples=6, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=schedules())
@example(plan=CORNERS[0])
def test_engine_decode_streams_equal_offline(codecs, plan):
    streams, max_batch, max_step_frames, seed = plan
    engine = Engine({"q": codecs[0]}, EngineSettings(
        max_streams=16, max_batch=max_batch, max_step_frames=max_step_frames), start=False)
    run_decode_schedule(engine, codecs[0], streams, seed, name="q")


def test_engine_encode_streams_equal_offline(codecs):
    """Streams of whole frames, pushed raggedly (the server's streams zero-pad a last partial
    frame, the "frame" convention: see the docs)."""
    window = codecs[1]
    rng = np.random.default_rng(4)
    audio = [(0.2 * rng.standard_normal(n * FRAME)).astype(np.float32) for n in (1, 5, 23, 31)]
    engine = Engine({"q": window}, EngineSettings(max_batch=3, max_step_frames=3), start=False)
    run_encode_streams(engine, window, audio, rng, name="q", push_chance=0.7)


def test_long_files_are_encoded_as_encode_does(codecs, tmp_path):
    """audiotok.streaming.files.encode_file (the command line's reader for long files): with window
    attention it streams the file block by block, with full attention it encodes it whole;
    both give encode()'s tokens, a ragged last frame included."""
    import soundfile as sf

    from audiotok.streaming.files import encode_file

    x = (0.2 * np.random.default_rng(5).standard_normal(3 * 24000 + 77)).astype(np.float32)
    sf.write(tmp_path / "long.wav", x, 24000, subtype="FLOAT")
    for codec in codecs:
        got = encode_file(codec, tmp_path / "long.wav", block_seconds=0.1)
        assert torch.equal(got.tokens, codec.encode(tmp_path / "long.wav").tokens)
