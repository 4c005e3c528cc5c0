"""WavTokenizer streamed and served. Its decoder attends to every frame, so a stream re-decodes
windows: the library's stream_decoder takes a window only when asked for one, every frame's
samples come out once, and a window that covers the whole input equals the offline decode;
HTTP encode and decode, and the WebSocket decode stream, equal the library."""

import io

import numpy as np
import pytest
import soundfile as sf
import torch

from audiotok.errors import AudiotokError
from tests.bounds import SAME_MODEL

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from audiotok.server import Engine, EngineSettings, WindowSettings  # noqa: E402
from audiotok.server.app import ServerSettings, create_app  # noqa: E402
from tests.server.test_app import ws_decode  # noqa: E402
from tests.server.test_engine import push_randomly  # noqa: E402


def test_library_streams_are_windows_asked_for(wt_refs):
    codec = wt_refs("tiny").codec
    with pytest.raises(AudiotokError, match="window"):
        codec.stream_decoder()
    tokens = torch.randint(0, 512, (1, 1, 43), generator=torch.Generator().manual_seed(2))
    offline = codec.decode(tokens)[0, 0]
    for window, exact in (((25, 25), False), ((60, 60), True)):
        with codec.stream_decoder(window=window) as dec:
            pieces = [dec.push(tokens[..., a : a + 5]) for a in range(0, 43, 5)]
            audio = torch.cat([*pieces, dec.flush()], -1)[0, 0]
        assert audio.shape == offline.shape == (43 * 320,)
        gap = (audio - offline).abs().max()
        assert gap <= SAME_MODEL if exact else gap > 1e-4  # (a window is not the whole input)


def test_engine_windows_have_exact_length(wt_refs):
    codec = wt_refs("tiny_40").codec
    tokens = np.random.default_rng(3).integers(0, 256, (1, 61))
    offline = codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
    for window in (WindowSettings(4, 3, 2), WindowSettings(80, 80, 80)):
        engine = Engine({"wt": codec}, EngineSettings(window=window), start=False)
        audio = push_randomly(engine, engine.open_decode_stream("wt"), tokens)
        assert audio.shape == offline.shape == (61 * 600,), window
        if window.chunk >= 61:
            assert np.abs(audio - offline).max() <= SAME_MODEL


def test_http_and_websocket_equal_the_library(wt_refs):
    codec = wt_refs("tiny").codec
    engine = Engine({"wt": codec}, EngineSettings(max_streams=2))
    try:
        with TestClient(create_app(engine, ServerSettings())) as client:
            x = 0.1 * np.random.default_rng(4).standard_normal(12345).astype(np.float32)
            buf = io.BytesIO()
            sf.write(buf, x, 24000, format="WAV", subtype="FLOAT")
            r = client.post("/v1/encode", content=buf.getvalue())
            assert r.status_code == 200, r.text
            want = codec.encode(x, 24000)
            doc = r.json()
            assert np.array_equal(np.array(doc["tokens"]), want.tokens[0].numpy())
            r = client.post("/v1/decode?format=wav", json={"tokens": doc["tokens"]})
            audio, rate = sf.read(io.BytesIO(r.content), dtype="float32")
            offline = codec.decode(want.tokens)[0, 0].numpy()
            assert rate == 24000 and audio.shape == offline.shape == (39 * 320,)
            assert np.abs(audio - offline).max() <= 1 / 32767 + SAME_MODEL
            streamed, done = ws_decode(client, want.tokens[0].numpy(), model="wt", push=7)
            assert streamed.shape == (39 * 320,) and done["samples"] == 39 * 320
            # the server's default windows (25, 25, 25) cover these 39 frames in two steps:
            # what the library's stream of those windows gives
            with codec.stream_decoder(window=(25, 25)) as dec:
                lib = torch.cat([dec.push(want.tokens), dec.flush()], -1)[0, 0].numpy()
            assert np.abs(streamed - lib).max() <= SAME_MODEL
    finally:
        engine.close(timeout=10)
