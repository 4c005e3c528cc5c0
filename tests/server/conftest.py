"""Helpers for tests that run `audiotok serve` as a real process on loopback."""

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.conftest import S2_TINY

MODEL = str(S2_TINY / "codec.pth")


def start_server(*args, api_key=None, model=MODEL, timeout=300):
    """Start `audiotok serve` and wait for its "serving ... on" line (printed once it answers
    requests); `timeout`: a cap for a loaded machine, not a wait."""
    env = dict(os.environ)
    env.pop("AUDIOTOK_API_KEY", None)
    p = subprocess.Popen([sys.executable, "-m", "audiotok", "serve", "-m", model, "--port", "0",
                          "--threads", "1", "--log-level", "warning", *args],
                         stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"serving .* on http://([\d.]+):(\d+)", line)
        if m:
            return p, f"{m.group(1)}:{m.group(2)}", lines
    p.kill()
    raise AssertionError("server did not start: " + "".join(lines))


def get(base, path):
    try:
        with urllib.request.urlopen(f"http://{base}{path}", timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
