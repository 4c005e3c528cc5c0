"""Builders of checkpoint variants for tests (not part of the library)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import torch

from audiotok.export.gguf import write_gguf as write_gguf_file
from audiotok.models.s2.config import S2Config
from audiotok.models.s2.gguf import gguf_metadata

_UNSET = object()


def s2_gguf_metadata(cfg: S2Config, frame_length: int = 2048) -> dict[str, tuple[str, object]]:
    """key -> (GGUF type, value), as s2.cpp's exporter writes them (the library's exporter's
    metadata, whose equality with the golden file tests/export/test_gguf.py checks)."""
    return gguf_metadata(cfg, frame_length)


def write_gguf(path: Path, arch: str, metadata: dict, tensors: dict[str, torch.Tensor]) -> None:
    write_gguf_file(path, arch, metadata, tensors)


_WN = [(".weight_g", ".weight_v"),
       (".parametrizations.weight.original0", ".parametrizations.weight.original1")]


def respell_weight_norm(sd: dict[str, torch.Tensor], spelling: str) -> dict[str, torch.Tensor]:
    """A fish-speech layout dict with every weight-norm pair in one spelling ("legacy" or
    "parametrizations") and v rescaled per channel, so that ||v|| != g."""
    g_name, v_name = _WN[0 if spelling == "legacy" else 1]
    out = {}
    for key, t in sd.items():
        for g_suffix, v_suffix in _WN:
            if key.endswith(g_suffix):
                out[key[: -len(g_suffix)] + g_name] = t
                break
            if key.endswith(v_suffix):
                scale = torch.linspace(0.5, 2.0, t.shape[0]).view(-1, *[1] * (t.dim() - 1))
                out[key[: -len(v_suffix)] + v_name] = t * scale
                break
        else:
            out[key] = t
    return out


def np_f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


TORCH_FREE_HEAD = """\
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
import numpy as np
import audiotok
from audiotok.errors import CodesError

folder, inputs, out = sys.argv[1:4]
codec = audiotok.load(folder)  # on OMP_NUM_THREADS threads (conftest.py)
d = np.load(inputs)
r = {}
"""


def torch_free_script(body: str) -> str:
    """A script for run_torch_free: TORCH_FREE_HEAD (torch made unimportable, the export folder
    loaded as `codec`, the inputs as `d`, results to collect in `r`), then `body`, then the
    results saved (torch still unimported)."""
    return (TORCH_FREE_HEAD + textwrap.dedent(body)
            + 'assert sys.modules["torch"] is None, "torch was imported"\nnp.savez(out, **r)\n')


def run_torch_free(script: str, folder, golden, tmp, licence: str) -> dict:
    """Run `script` (folder, golden .npz, output .npz) in a fresh interpreter; its results."""
    out = tmp / "results.npz"
    (tmp / "run.py").write_text(script)
    r = subprocess.run([sys.executable, str(tmp / "run.py"), str(folder), str(golden), str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert licence in r.stderr  # the weights' licence is announced
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def export_onnx_cli(checkpoint, out, *options: str):
    """`audiotok export CHECKPOINT --format onnx -o OUT [OPTIONS]` as a user runs it; its output
    text."""
    from click.testing import CliRunner

    from audiotok.cli import main

    r = CliRunner().invoke(main, ["export", str(checkpoint), "--format", "onnx", "-o", str(out),
                                  *options], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def onnx_graph_facts(path) -> tuple[dict, list[list]]:
    """An exported graph, checked by onnx: its metadata, and each input's dims (names for the
    dynamic ones)."""
    import onnx

    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    meta = {p.key: p.value for p in model.metadata_props}
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input]
    return meta, dims


@contextlib.contextmanager
def served_client(codecs: dict):
    """A TestClient of `audiotok serve`'s app over an engine of `codecs` (4 streams, 5 s idle
    timeout), the engine closed after."""
    from fastapi.testclient import TestClient

    from audiotok.server import Engine, EngineSettings
    from audiotok.server.app import ServerSettings, create_app

    engine = Engine(codecs, EngineSettings(max_streams=4))
    try:
        with TestClient(create_app(engine, ServerSettings(idle_timeout=5.0))) as client:
            yield client
    finally:
        engine.close(timeout=10)


def ws_stream_decode(client, model: str, tokens: np.ndarray, pushes, **start
                     ) -> tuple[dict, np.ndarray, dict]:
    """Tokens [K, T] sent over /v1/stream/decode as binary pushes of `pushes` frames each (f32le
    out; `start`: more of the start message): (the ready message, the audio, the done
    message)."""
    import json

    from audiotok.server.protocol import tokens_to_binary

    with client.websocket_connect("/v1/stream/decode") as ws:
        ws.send_json({"type": "start", "model": model, "sample_format": "f32le", **start})
        ready = ws.receive_json()
        sent = 0
        for n in pushes:
            ws.send_bytes(tokens_to_binary(tokens[:, sent : sent + n]))
            sent += n
        assert sent == tokens.shape[1]
        ws.send_json({"type": "end"})
        pcm = []
        while (msg := ws.receive()).get("bytes") is not None:
            pcm.append(np.frombuffer(msg["bytes"], "<f4"))
        return ready, np.concatenate(pcm), json.loads(msg["text"])


def stream_decoded(codec, tokens: torch.Tensor, sizes, **options) -> torch.Tensor:
    """Tokens [B, K, T] through codec.stream_decoder(B, **options), pushed `sizes` frames at a
    time, then flushed: the stream's audio."""
    pieces, sent = [], 0
    with codec.stream_decoder(tokens.shape[0], **options) as dec:
        for n in sizes:
            pieces.append(dec.push(tokens[..., sent : sent + n]))
            sent += n
        pieces.append(dec.flush())
    return torch.cat(pieces, -1)


def check_served(codec, model: str, audio: np.ndarray, tokens: np.ndarray, decode: str) -> None:
    """`codec` served as `model`: HTTP encode of `audio` (f32le at the codec's rate) gives the
    library's codes, HTTP decode of them (with the encode's num_samples) its audio (within
    SAME_MODEL, the same length), and a WebSocket decode stream of `tokens` [K, T] in ragged
    pushes its offline decode, with the stream kind `decode` in the ready message. Codes with
    utterance tokens carry them (the encode's, sent with each decode)."""
    import torch

    from tests.bounds import SAME_MODEL

    rate = codec.sample_rate
    with served_client({model: codec}) as client:
        r = client.post(f"/v1/encode?model={model}&pcm=f32le&sample_rate={rate}&format=json",
                        content=audio.astype(np.float32).tobytes())
        assert r.status_code == 200, r.text
        want = codec.encode(torch.from_numpy(audio), rate)
        got = np.asarray(r.json()["tokens"]).reshape(want.tokens[0].shape)
        assert np.array_equal(got, want.tokens[0].numpy())
        extra = {}
        if want.globals is not None:
            extra = {"globals": want.globals[0].tolist()}
            assert r.json()["globals"] == extra["globals"]
        # (with the encode's num_samples: the samples its frames decode to, at most)
        assert r.json()["num_samples"] == int(want.num_samples[0])
        r = client.post(f"/v1/decode?model={model}&format=pcm&sample_format=f32le",
                        json={"tokens": want.tokens[0].tolist(),
                              "num_samples": [int(want.num_samples[0])], **extra})
        assert r.status_code == 200, r.text
        ref = codec.decode(want)[0, 0].numpy()
        pcm = np.frombuffer(r.content, "<f4")
        assert pcm.shape == ref.shape and np.abs(pcm - ref).max() <= SAME_MODEL
        offline = codec.decode(torch.from_numpy(tokens), globals=want.globals)[0, 0].numpy()
        t = tokens.shape[1]
        ready, got, done = ws_stream_decode(client, model, tokens, (1, 5, 2, t - 8), **extra)
        assert ready["type"] == "ready" and ready["decode"] == decode, ready
        assert done["type"] == "done" and done["samples"] == offline.size
        assert got.shape == offline.shape and np.abs(got - offline).max() <= SAME_MODEL


# each `audio_N` input encoded and decoded alone, then all in one batch with the last length twice
EACH_LENGTH_AND_A_BATCH = torch_free_script("""
    lengths = [int(k[6:]) for k in d if k.startswith("audio_")]
    for n in lengths:
        r[f"codes_{n}"] = codec.encode(d[f"audio_{n}"]).tokens[0]
        r[f"decoded_{n}"] = codec.decode(codec.encode(d[f"audio_{n}"]))[0, 0]
    batch = codec.encode([d[f"audio_{n}"] for n in lengths + lengths[-1:]])  # a length twice
    r["batch_codes"], r["batch_lengths"] = batch.tokens, batch.lengths
    r["batch_audio"] = codec.decode(batch)
""")
