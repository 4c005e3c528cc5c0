"""`audiotok serve` as a real process on loopback: SIGTERM drains (readiness fails, new work is
refused, the open stream finishes exactly, exit 0), and a client killed with SIGKILL
mid-stream frees its slot."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
from audiotok.server.client import DecodeStreamClient, StreamError, stream_decode  # noqa: E402
from tests.server.conftest import get, start_server  # noqa: E402


def random_tokens(codec, frames, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n, (frames,), generator=g)
                        for n in codec.codebook_sizes]).numpy()


def test_sigterm_drains_open_streams_then_exits_0(s2_codec):
    p, base, _ = start_server("--drain-timeout", "30")
    try:
        tokens = random_tokens(s2_codec, 30, 1)
        want = s2_codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
        # the whole path once through the shipped client
        audio, summary, times = stream_decode(f"ws://{base}", tokens, push_frames=4)
        assert np.abs(audio - want).max() <= 1e-5 and summary["frames"] == 30
        assert len(times.chunks) >= 2
        s = DecodeStreamClient(f"ws://{base}")
        s.send(tokens[:, :10])
        first = s.recv(timeout=60)
        os.kill(p.pid, signal.SIGTERM)  # the server process alone
        deadline = time.monotonic() + 10
        while get(base, "/readyz")[0] != 503:
            assert time.monotonic() < deadline, "readiness never failed"
            time.sleep(0.05)
        assert get(base, "/healthz")[0] == 200
        assert get(base, "/v1/models")[0] == 503
        with pytest.raises(StreamError) as e:
            DecodeStreamClient(f"ws://{base}")
        assert e.value.code == 1013 and "shutting down" in e.value.reason
        s.send(tokens[:, 10:])  # the open stream goes on to its end
        s.end()
        chunks = [first]
        while (pcm := s.recv(timeout=60)) is not None:
            chunks.append(pcm)
        s.close()
        assert np.abs(np.concatenate(chunks) - want).max() <= 1e-5
        assert s.summary == {"type": "done", "frames": 30, "samples": 30 * 2048}
        assert p.wait(timeout=60) == 0
    finally:
        p.kill()


CLIENT = """
import sys, time
import numpy as np
from audiotok.server.client import DecodeStreamClient
s = DecodeStreamClient(sys.argv[1])
s.send(np.zeros((10, 3), np.int64))
s.recv(timeout=60)
print("streaming", flush=True)
time.sleep(60)
"""


def test_a_client_killed_mid_stream_frees_its_slot():
    p, base, _ = start_server("--max-streams", "1", "--cuda-graphs")  # ignored on the CPU
    try:
        c = subprocess.Popen([sys.executable, "-c", CLIENT, f"ws://{base}"],
                             stdout=subprocess.PIPE, text=True)
        assert c.stdout.readline().strip() == "streaming"
        assert b"audiotok_open_streams{model=\"s2_tiny\"} 1.0" in get(base, "/metrics")[1]
        with pytest.raises(StreamError) as e:  # the one slot is taken
            DecodeStreamClient(f"ws://{base}")
        assert e.value.code == 1013
        os.kill(c.pid, signal.SIGKILL)
        c.wait()
        deadline = time.monotonic() + 20
        while b"audiotok_open_streams{model=\"s2_tiny\"} 0.0" not in get(base, "/metrics")[1]:
            assert time.monotonic() < deadline, "the dead client's stream was never freed"
            time.sleep(0.1)
        with DecodeStreamClient(f"ws://{base}") as s:  # the slot is usable again
            s.send(np.zeros((10, 2), np.int64))
            assert s.recv(timeout=60).shape == (2 * 2048,)
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=60) == 0
    finally:
        p.kill()


def test_warns_when_exposed_without_a_key():
    p, base, lines = start_server("--host", "0.0.0.0")
    try:
        assert any("without --api-key" in line for line in lines), lines
        assert base.startswith("0.0.0.0:")
    finally:
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=60) == 0
