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
from tests.bounds import SAME_MODEL  # noqa: E402
from tests.conftest import XCODEC2_TINY  # noqa: E402
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
        assert np.abs(audio - want).max() <= SAME_MODEL and summary["frames"] == 30
        assert len(times.chunks) >= 2
        s = DecodeStreamClient(f"ws://{base}")
        s.send(tokens[:, :10])
        first = s.recv(timeout=60)
        os.kill(p.pid, signal.SIGTERM)  # the server process alone
        deadline = time.monotonic() + 10
        while b"shutting down" not in get(base, "/readyz")[1]:
            assert time.monotonic() < deadline, "readiness never failed"
            time.sleep(0.05)
        assert get(base, "/readyz")[0] == 503
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
        assert np.abs(np.concatenate(chunks) - want).max() <= SAME_MODEL
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


def test_listens_at_once_and_serves_while_warming_up(s2_codec):
    """/healthz answers within 5 s of the process's start while /readyz is 503 (the models
    load, then warm up, after the socket listens); a decode sent then waits for the models and
    equals the library's; /readyz turns 200 with every model's warm-up progress, which the
    metrics and the log report too."""
    import json

    start = time.monotonic()
    p, base, lines = start_server("-m", f"xc={XCODEC2_TINY / 'hf'}")
    try:
        assert get(base, "/healthz")[0] == 200
        assert time.monotonic() - start < 5.0, "no /healthz within 5 s"
        status, body = get(base, "/readyz")
        assert status == 503 and json.loads(body)["reason"] in ("loading the models",
                                                                "warming up")
        tokens = random_tokens(s2_codec, 40, 3)
        buf = __import__("io").BytesIO()
        np.save(buf, tokens)
        import urllib.request

        req = urllib.request.Request(f"http://{base}/v1/decode?model=s2_tiny&format=pcm"
                                     "&sample_format=f32le", data=buf.getvalue(), method="POST")
        with urllib.request.urlopen(req, timeout=120) as r:  # sent while not ready
            pcm = np.frombuffer(r.read(), "<f4")
        want = s2_codec.decode(torch.from_numpy(tokens))[0, 0].numpy()
        assert pcm.shape == want.shape and np.abs(pcm - want).max() <= SAME_MODEL
        deadline = time.monotonic() + 120
        while (r := get(base, "/readyz"))[0] != 200:
            assert r[0] == 503 and time.monotonic() < deadline
            time.sleep(0.05)
            if r[1] and "warmup" in json.loads(r[1]):  # the progress, while warming up
                assert set(json.loads(r[1])["warmup"]) == {"s2_tiny", "xc"}
        warmup = json.loads(r[1])["warmup"]
        assert set(warmup) == {"s2_tiny", "xc"} and all(m["complete"] for m in warmup.values())
        assert all(m["done"] == m["shapes"] for m in warmup.values())
        metrics = get(base, "/metrics")[1].decode()
        assert "audiotok_ready 1.0" in metrics
        for model in ("s2_tiny", "xc"):
            assert f'audiotok_warmup_seconds{{model="{model}"}}' in metrics
            assert f'audiotok_warmup_complete_after_seconds{{model="{model}"}}' in metrics
        os.kill(p.pid, signal.SIGTERM)
        assert p.wait(timeout=60) == 0
        log = "".join(lines) + p.stderr.read()
        assert "warmed up s2_tiny: 106 step shapes" in log and "warmed up xc: 1 step shapes" in log
    finally:
        p.kill()


def test_a_model_that_fails_to_load_stops_the_server(tmp_path):
    """A checkpoint that is recognised but broken fails after the server listens: the process
    says why and exits 1; one that is not recognised fails before it listens."""
    broken = tmp_path / "broken.pth"
    broken.write_bytes(b"not a torch checkpoint")
    r = subprocess.run([sys.executable, "-m", "audiotok", "serve", "-m", str(broken), "--port",
                        "0", "--log-level", "warning"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
    assert f"audiotok: error: {broken}: not a plain tensor checkpoint" in r.stderr
    assert "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = subprocess.run([sys.executable, "-m", "audiotok", "serve", "-m",
                        str(tmp_path / "empty"), "--port", "0"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and "cannot tell which codec" in r.stderr
    assert "serving" not in r.stderr


def test_the_server_listens_before_torch_is_imported():
    """What runs before the socket listens (the command line, the checks of the model specs,
    the web app) imports no torch: torch and the models load after."""
    code = ("import sys; import audiotok.cli; from audiotok.cli.serve import check_model; "
            f"check_model({str(XCODEC2_TINY / 'hf')!r}); import audiotok.server.app, "
            "audiotok.server.run; from audiotok.server import EngineSettings; "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr

