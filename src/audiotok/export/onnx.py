"""ONNX export: a folder of graphs any ONNX runtime can run, plus `audiotok_onnx.json` (the
model's facts, the graphs, and what a runtime needs to drive them; audiotok.runtime runs it).

S2 (causal): `encoder.onnx` (audio [B, 1, N], N a multiple of the frame size -> codes
[B, K, T] int64), `decoder.onnx` (codes [B, K, T] -> audio [B, 1, T * frame]) and the step
graphs `decoder_step.onnx` (codes [B, K, t] with the streaming state -> audio [B, 1, t * frame]
and the new state) and `encoder_step.onnx` (whole frames of audio in, their tokens out). The
step graphs' state is explicit: every causal convolution's left context, every transposed
convolution's tail, each attention layer's windowed keys and values and the position counter;
driving them push by push gives the offline results. Masks and RoPE tables are computed in the
graph from positions (the bfloat16 rounding of the RoPE table included), never stored for a
fixed length.

X-Codec2: `features.onnx` (audio [B, 1, 320 T] -> the semantic branch's log-mel input
[B, T, 160], the real DFT as float64 matrix products), `encoder.onnx` (audio and its features ->
codes [B, 1, T]) and `decoder.onnx` (codes -> audio [B, 1, 320 T], the iSTFT as real matrix
products and a shifted-sum overlap-add). No complex tensors, no data-dependent asserts; like the
torch codec, the runtime windows inputs longer than `window_frames` with `context_frames` each
side (the manifest carries both), and runs items of different lengths apart.

Every graph takes a dynamic batch and length, up to MAX_FRAMES frames per call.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten, tree_flatten_with_path, tree_unflatten

from .._version import __version__
from ..errors import AudiotokError
from ..nn.streaming import streaming, streaming_modules
from ..nn.tracing import graph_export

FORMAT = "audiotok-onnx"
FORMAT_VERSION = 1
MANIFEST = "audiotok_onnx.json"
MAX_FRAMES = 1 << 20


class _Call(torch.nn.Module):
    """fn(model, *tensors) as a module that owns the model's parameters, for torch.onnx.export."""

    def __init__(self, model, fn):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, x, y=None):  # one or two tensors (torch.export wants fixed arguments)
        return self.fn(self.model, x) if y is None else self.fn(self.model, x, y)


class _Step(torch.nn.Module):
    """model.<method> in streaming mode with the state of `modules` passed in and returned,
    flat: (x, state) -> (y, new state)."""

    def __init__(self, model, method: str, modules, spec):
        super().__init__()
        self.model, self.method, self.modules_, self.spec = model, method, modules, spec

    def forward(self, x, state):
        states = tree_unflatten(list(state), self.spec)
        for m, s in zip(self.modules_, states, strict=True):
            m.stream = dict(s)
        try:
            y = getattr(self.model, self.method)(x)
            new = [{k: m.stream[k] for k in s} for m, s in zip(self.modules_, states,
                                                                strict=True)]
        finally:
            for m in self.modules_:
                m.stream = None
        return y, *tree_flatten(new)[0]


def step_state(codec, method: str) -> tuple[list, list[str], object]:
    """(the streaming modules model.<method> uses, their state's flat names, the state's tree
    spec), found by running one frame in streaming mode."""
    model = codec.model
    modules = streaming_modules(model)
    probe = (torch.zeros(1, codec.num_codebooks, 1, dtype=torch.long) if method == "decode"
             else torch.zeros(1, 1, codec.samples_per_frame))
    with torch.inference_mode(), streaming(model):
        getattr(model, method)(probe)
        used = [m for m in modules if any(k != "ragged" for k in m.stream)]
    names_of = {m: n for n, m in model.named_modules()}
    states = [m.initial_state(1, torch.device("cpu")) for m in used]
    _, spec = tree_flatten(states)
    names = []
    for path, _ in tree_flatten_with_path(states)[0]:
        index, *rest = (getattr(p, "key", getattr(p, "idx", None)) for p in path)
        names.append(".".join(["state", names_of[used[index]], *(str(r) for r in rest)]))
    return used, names, spec


def export_onnx(codec, out: str | os.PathLike, *, max_push_frames: int | None = None) -> Path:
    """Export `codec` (float32) as ONNX graphs into the folder `out` (made whole or not at
    all). S2: max_push_frames is the most frames one step graph call takes (default and at
    most: what one step can attend over exactly, the smallest attention window in frames)."""
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        raise AudiotokError("ONNX export needs onnx and onnxscript "
                            "(pip install 'audiotok[onnx]')") from None
    if codec.name not in ("s2", "xcodec2"):
        raise AudiotokError(f"ONNX export of {codec.title} is not available")
    if codec.dtype != torch.float32:
        raise AudiotokError("export from a float32 codec (load it with dtype=float32)")
    if codec.name != "s2" and max_push_frames is not None:
        raise AudiotokError(f"max_push_frames applies to S2 (a causal codec); {codec.title} has "
                            "no step graphs")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AudiotokError(f"{out}: exists and is not an empty folder")
    facts = {"format": FORMAT, "format_version": FORMAT_VERSION, "audiotok_version": __version__,
             "codec": codec.name, "model": codec.title, "sample_rate": codec.sample_rate,
             "samples_per_frame": codec.samples_per_frame, "num_codebooks": codec.num_codebooks,
             "codebook_sizes": list(codec.codebook_sizes), "causal": bool(codec.causal),
             "licence": codec.licence, "source": os.path.basename(str(codec.source))}
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent if out.parent.exists()
                                else None))
    try:
        with torch.no_grad(), graph_export(), _quiet():
            if codec.name == "s2":
                extra = _s2_graphs(codec, tmp, facts, max_push_frames)
            else:
                extra = _xcodec2_graphs(codec, tmp, facts)
        (tmp / MANIFEST).write_text(json.dumps({**facts, **extra}, indent=1) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it 0700
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _s2_graphs(codec, tmp: Path, facts: dict, max_push_frames: int | None) -> dict:
    """encoder, decoder, encoder_step and decoder_step; the manifest's extra entries."""
    model = codec.model.eval()
    spf, cfg = codec.samples_per_frame, codec.config
    per_frame = spf // cfg.hop_length  # encoder-transformer positions per code frame
    windows = (cfg.rvq_transformer.window_size, cfg.encoder_transformer_window // per_frame)
    limit = min(windows)
    max_push = limit if max_push_frames is None else int(max_push_frames)
    if not 1 <= max_push <= limit:
        raise AudiotokError(f"max_push_frames must be 1..{limit} (the attention window)")
    batch = torch.export.Dim("batch", min=1, max=4096)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    step_frames = torch.export.Dim("step_frames", min=1, max=max_push)
    # example lengths spanning at least two attention windows of every transformer, so that
    # tracing sees the general case (a length of one window would be specialised)
    example = 2 * max(windows) + 3
    codes = torch.stack([torch.randint(0, s, (2, example)) for s in codec.codebook_sizes], 1)
    audio = torch.randn(2, 1, example * spf) * 0.1
    graphs, states = {}, {}
    graphs["decoder"] = _export(
        _Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
        ["audio"], {"codes": {0: batch, 2: frames}}, facts)
    graphs["encoder"] = _export(
        _Call(model, lambda m, a: m.encode(a)), (audio,), tmp / "encoder.onnx", ["audio"],
        ["codes"], {"audio": {0: batch, 2: spf * frames}}, facts)
    steps = {"decoder_step": ("decode", codes[:, :, :3], "codes", "audio", step_frames),
             "encoder_step": ("encode", audio[..., : 3 * spf], "audio", "codes",
                              spf * step_frames)}
    for graph, (method, x, x_name, y_name, length) in steps.items():
        modules, names, spec = step_state(codec, method)
        state = tree_flatten([m.initial_state(2, torch.device("cpu")) for m in modules])[0]
        graphs[graph] = _export(
            _Step(model, method, modules, spec), (x, tuple(state)), tmp / f"{graph}.onnx",
            [x_name, *names], [y_name, *[_new(n) for n in names]],
            ({0: batch, 2: length}, tuple({0: batch} for _ in state)), facts)
        states[graph] = [{"name": n, "shape": list(t.shape[1:]),
                          "dtype": str(t.dtype).removeprefix("torch.")}
                         for n, t in zip(names, state, strict=True)]
    return {"graphs": graphs, "max_push_frames": max_push, "state": states}


def _xcodec2_graphs(codec, tmp: Path, facts: dict) -> dict:
    """features (audio -> the semantic branch's input), encoder (audio and its features ->
    codes) and decoder; long inputs are windowed by the runtime as the torch codec windows them
    (the features of a window are a slice of the whole signal's)."""
    model = codec.model.eval()
    hop = codec.samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    frames = torch.export.Dim("frames", min=2, max=MAX_FRAMES)
    example = 2 * max(model.config.semantic.left_max_position_embeddings,
                      model.config.semantic.right_max_position_embeddings) + 37
    audio = torch.randn(2, 1, example * hop) * 0.1
    features, _ = model.features(audio)
    codes = torch.randint(0, codec.codebook_sizes[0], (2, 1, example))
    graphs = {
        "features": _export(
            _Call(model, lambda m, a: m.features(a)[0]), (audio,), tmp / "features.onnx", ["audio"],
            ["features"], {"audio": {0: batch, 2: hop * frames}}, facts),
        "encoder": _export(
            _Call(model, lambda m, a, f: m.encode(a, features=f)[:, None]), (audio, features),
            tmp / "encoder.onnx", ["audio", "features"], ["codes"],
            {"audio": {0: batch, 2: hop * frames}, "features": {0: batch, 1: frames}}, facts),
        "decoder": _export(
            _Call(model, lambda m, c: m.decode(c[:, 0])), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts),
    }
    return {"graphs": graphs, "window_frames": codec.window_frames,
            "context_frames": codec.context_frames}


def _new(name: str) -> str:
    return name.replace("state.", "new_state.", 1)


@contextlib.contextmanager
def _quiet():
    """The exporter's warnings and its log lines (missing torchvision ops and the like)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _export(module, args, path: Path, inputs, outputs, dynamic, facts) -> str:
    """Trace `module` and save it at `path` with `facts` as metadata; weights over 2 GB go to
    `<name>.data` beside it (ONNX's protobuf limit), which runtimes load from the same folder."""
    if isinstance(dynamic, dict):  # by input name -> by position
        dynamic = tuple(dynamic[name] for name in inputs)
    program = torch.onnx.export(module, args, dynamic_shapes=dynamic, input_names=inputs,
                                output_names=outputs, dynamo=True, external_data=False,
                                verbose=False)
    for key, value in facts.items():
        program.model.metadata_props[key] = value if isinstance(value, str) else json.dumps(value)
    program.save(str(path))
    return path.name
