"""ONNX export: a folder of graphs any ONNX runtime can run, plus `audiotok_onnx.json` (the
model's facts, the graphs, and what a runtime needs to drive them; audiotok.runtime runs it).

The family's hook (`Family.onnx(codec, folder, facts, settings)`, in models/<family>/onnx.py)
writes the graphs; this module holds what every family uses. A non-causal codec's export has
`encoder.onnx` (after the graphs the manifest's `encode_graphs` lists first, if any) and
`decoder.onnx` (codes [B, K, T] -> audio [B, 1, T * frame]; an encode-only codec has none, and
its manifest says why in `decode_refusal`; a codec whose codes carry utterance tokens names
the graph that makes them, `utterance_graph`, and its decoder graph takes them as `globals`; a
family whose encoder needs a numpy front end names it, `frontend` with `frontend_settings`,
for the runtime to run first); its manifest carries
`window_frames` and `context_frames`, and the runtime windows long inputs as the torch codec
does, and runs items of different lengths apart. A causal codec's hook calls `causal_graphs`:
the step graphs `decoder_step.onnx` (codes [B, K, t] with the streaming state -> audio
[B, 1, t * frame] and the new state) and `encoder_step.onnx` (whole frames of audio in, their
tokens out), whose state is explicit (every streaming module's: convolution contexts,
transposed-convolution tails, attention keys and values, position counters), and the
whole-input `encoder.onnx` and `decoder.onnx`, which the runtime runs for whole inputs (on
some CPUs faster than the step graphs over pieces: docs/interop.md). Driving the step graphs
push by push gives the offline results, so an export may leave the whole-input graphs out
(OnnxSettings.offline_graphs False: each weight once, half the size and the export time); the
runtime then encodes and decodes whole inputs through the step graphs, as the torch codec runs
long inputs. An encoder
that pads a partial last frame itself always has its whole-input graph (a step graph takes
whole frames).

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
from dataclasses import dataclass
from pathlib import Path

import torch

from .._version import __version__
from ..errors import AudiotokError
from ..nn.streaming import streaming, streaming_modules
from ..nn.tracing import graph_export
from ..streaming.spec import LAYERS
from .onnx_direct import direct_translation

FORMAT = "audiotok-onnx"
FORMAT_VERSION = 2  # 2: a causal codec's whole-input graphs may be left out (offline_graphs)
MANIFEST = "audiotok_onnx.json"
MAX_FRAMES = 1 << 20


@dataclass(frozen=True)
class OnnxSettings:
    """What a causal codec's export holds beyond its step graphs (a non-causal codec takes
    neither setting)."""

    max_push_frames: int | None = None  # the most frames one step graph call takes (default
    # and limit: the family's, e.g. what one step can attend over exactly)
    offline_graphs: bool = True  # the whole-input encoder.onnx and decoder.onnx too (False:
    # the step graphs only, which the runtime then drives for whole inputs)


class Call(torch.nn.Module):
    """fn(model, *tensors) as a module that owns the model's parameters, for torch.onnx.export."""

    def __init__(self, model, fn):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, x, y=None):  # one or two tensors (torch.export wants fixed arguments)
        return self.fn(self.model, x) if y is None else self.fn(self.model, x, y)


class Step(torch.nn.Module):
    """model.<method> in streaming mode with the state of `modules` passed in and returned,
    flat: (x, state) -> (y, new state); `templates`: each module's state structure."""

    def __init__(self, model, method: str, modules, templates):
        super().__init__()
        self.model, self.method, self.modules_, self.templates = model, method, modules, templates

    def forward(self, x, state):
        it = iter(state)
        for m, template in zip(self.modules_, self.templates, strict=True):
            m.streaming, m.state = True, template.rebuilt(it)
        try:
            y = getattr(self.model, self.method)(x)
            new = [t for m in self.modules_ for t in m.state.tensors()]
        finally:
            for m in self.modules_:
                m.streaming, m.state = False, None
        return y, *new


def step_state(codec, method: str) -> tuple[list, list[str], list]:
    """(the streaming modules model.<method> uses, their state's flat names, their states'
    structures), found by running one frame in streaming mode."""
    model = codec.model
    modules = streaming_modules(model)
    probe = (torch.zeros(1, codec.num_codebooks, 1, dtype=torch.long) if method == "decode"
             else torch.zeros(1, 1, codec.samples_per_frame))
    with torch.inference_mode(), streaming(model):
        getattr(model, method)(probe)
        used = [m for m in modules if m.state is not None]
    names_of = {m: n for n, m in model.named_modules()}
    templates = [m.new_state(1, torch.device("cpu")) for m in used]
    names = [f"state.{names_of[m]}.{name}" for m, t in zip(used, templates, strict=True)
             for name, _ in t.named_tensors()]
    return used, names, templates


def export_onnx(codec, out: str | os.PathLike, settings: OnnxSettings | None = None) -> Path:
    """Export `codec` (float32) as ONNX graphs into the folder `out` (made whole or not at
    all); causal codecs take `settings` (OnnxSettings)."""
    settings = settings or OnnxSettings()
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        raise AudiotokError("ONNX export needs onnx and onnxscript "
                            "(pip install 'audiotok[onnx]')") from None
    if not codec.family.onnx:
        raise AudiotokError(f"ONNX export of {codec.title} is not available")
    if codec.dtype != torch.float32:
        raise AudiotokError("export from a float32 codec (load it with dtype=float32)")
    layers = codec.streaming.decode == LAYERS
    if not layers and settings != OnnxSettings():
        raise AudiotokError(f"max_push_frames and offline_graphs apply to causal codecs; "
                            f"{codec.title} has no step graphs (its graphs are whole-input)")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AudiotokError(f"{out}: exists and is not an empty folder")
    facts = {"format": FORMAT, "format_version": FORMAT_VERSION, "audiotok_version": __version__,
             "codec": codec.name, "model": codec.title, **codec.rate_facts(),
             "samples_per_frame": codec.samples_per_frame, "num_codebooks": codec.num_codebooks,
             "codebook_sizes": list(codec.codebook_sizes), "causal": layers,
             "frame_rule": codec.frame_rule, "licence": codec.licence,
             "source": os.path.basename(str(codec.source))}
    if codec.decode_refusal is not None:  # an encode-only codec: no decoder graph
        facts["decode_refusal"] = codec.decode_refusal
    if codec.global_tokens:  # codes with utterance tokens (Codes.globals)
        facts.update(global_tokens=codec.global_tokens,
                     global_codebook_size=codec.global_codebook_size)
    if codec.feature_windows is not None:  # (the runtime windows long inputs by this plan)
        facts["feature_windows"] = codec.feature_windows.to_dict()
    if codec.min_samples:
        facts["min_samples"] = codec.min_samples
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent if out.parent.exists()
                                else None))
    try:
        with torch.no_grad(), graph_export(), _quiet():
            extra = codec.family.resolve(codec.family.onnx)(codec, tmp, facts, settings)
        if not layers:  # the runtime windows long inputs as the torch codec does
            long = codec.streaming.long_window
            extra.update(window_frames=None if long is None else long.chunk,
                         context_frames=0 if long is None else long.left)
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


def causal_graphs(codec, tmp: Path, facts: dict, example_frames: int, max_push: int,
                  offline: bool, encoder_step: bool = True, raw_samples: bool = False) -> dict:
    """decoder_step and encoder_step of a causal codec (its model's decode and encode,
    streaming through nn/streaming.py's modules), and with `offline` the whole-input encoder
    and decoder; the manifest's extra entries. Tracing runs `example_frames` frames (long
    enough that no attention window is specialised) and step graphs of up to `max_push` frames.
    encoder_step=False, or an encoder that does not stream as loaded (Codec.stream_refusal): no
    encoder step graph, and the encoder graph always. raw_samples: the encoder graphs take any
    number of samples, their convolutions padding a last partial frame themselves
    (StreamSpec.end_padding "layers"; the manifest's `encode_input: "samples"`): the runtime
    feeds a stream's whole frames to the step graph and its last partial frame as it is."""
    model = codec.model.eval()
    spf = codec.samples_per_frame
    batch = torch.export.Dim("batch", min=1, max=4096)
    frames = torch.export.Dim("frames", min=1, max=MAX_FRAMES)
    step_frames = torch.export.Dim("step_frames", min=1, max=max_push)
    codes = torch.stack([torch.randint(0, s, (2, example_frames))
                         for s in codec.codebook_sizes], 1)
    audio = torch.randn(2, 1, example_frames * spf) * 0.1
    graphs, states = {}, {}
    encoder_step = encoder_step and codec.stream_refusal("encode") is None
    if offline:
        graphs["decoder"] = export_graph(
            Call(model, lambda m, c: m.decode(c)), (codes,), tmp / "decoder.onnx", ["codes"],
            ["audio"], {"codes": {0: batch, 2: frames}}, facts)
    if offline or not encoder_step:
        # raw samples: unnamed dynamic sizes (named, the ceil divisions of every layer's length
        # become derived dimensions torch.export cannot state)
        dims = {0: torch.export.Dim.DYNAMIC, 2: torch.export.Dim.DYNAMIC} if raw_samples \
            else {0: batch, 2: spf * frames}
        graphs["encoder"] = export_graph(
            Call(model, lambda m, a: m.encode(a)), (audio[..., :-37] if raw_samples else audio,),
            tmp / "encoder.onnx", ["audio"], ["codes"], {"audio": dims}, facts)
    steps = {"decoder_step": ("decode", codes[:, :, :3], "codes", "audio", step_frames)}
    if encoder_step:  # raw samples: traced on a ragged length, any length in the graph
        ragged = 37 if raw_samples else 0
        steps["encoder_step"] = ("encode", audio[..., : 3 * spf - ragged], "audio", "codes",
                                 torch.export.Dim.DYNAMIC if raw_samples else spf * step_frames)
    for graph, (method, x, x_name, y_name, length) in steps.items():
        modules, names, templates = step_state(codec, method)
        state = [t for m in modules for t in m.new_state(2, torch.device("cpu")).tensors()]
        graphs[graph] = export_graph(
            Step(model, method, modules, templates), (x, tuple(state)), tmp / f"{graph}.onnx",
            [x_name, *names], [y_name, *[_new(n) for n in names]],
            ({0: batch, 2: length}, tuple({0: batch} for _ in state)), facts)
        states[graph] = [{"name": n, "shape": list(t.shape[1:]),
                          "dtype": str(t.dtype).removeprefix("torch.")}
                         for n, t in zip(names, state, strict=True)]
    extra = {"graphs": graphs, "max_push_frames": max_push, "state": states}
    return {**extra, "encode_input": "samples"} if raw_samples else extra


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


def _optimize(model) -> None:
    """What torch.onnx.export(optimize=True) runs (onnxscript's optimizer, then its fusions),
    less one rewrite rule: SlicesSplit (two Slices that halve a last axis become one Split)
    matches every pair of Slice nodes in the graph, quadratic in its size, for one node saved;
    on a codec with a conformer it took a third of the export time."""
    from onnxscript import optimizer, rewriter
    from onnxscript.rewriter import onnx_fusions

    rules = rewriter._DEFAULT_REWRITE_RULES
    rewriter._DEFAULT_REWRITE_RULES = tuple(r for r in rules if r.name != "SlicesSplit")
    try:
        optimizer.optimize_ir(model)
    finally:
        rewriter._DEFAULT_REWRITE_RULES = rules
    onnx_fusions.fuse(model)


@contextlib.contextmanager
def _no_stack_traces():
    """Trace without recording each node's Python stack: the exporter would write it into every
    ONNX node's metadata (the exporting machine's file paths, an eighth of an encoder's file)."""
    before = torch.fx.config.do_not_emit_stack_traces
    torch.fx.config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        torch.fx.config.do_not_emit_stack_traces = before


def export_graph(module, args, path: Path, inputs, outputs, dynamic, facts) -> str:
    """Trace `module` and save it at `path` with `facts` as metadata; weights over 2 GB go to
    `<name>.data` beside it (ONNX's protobuf limit), which runtimes load from the same folder."""
    if isinstance(dynamic, dict):  # by input name -> by position
        dynamic = tuple(dynamic[name] for name in inputs)
    with direct_translation(), _no_stack_traces():
        program = torch.onnx.export(module, args, dynamic_shapes=dynamic, input_names=inputs,
                                    output_names=outputs, dynamo=True, external_data=False,
                                    verbose=False, optimize=False)
    _optimize(program.model)
    for key, value in facts.items():
        program.model.metadata_props[key] = value if isinstance(value, str) else json.dumps(value)
    program.save(str(path))
    return path.name
