"""The official S3 tokenizer files (`speech_tokenizer_v1.onnx`, `_v2.onnx`, `_v3.onnx` of the
CosyVoice repositories): their weights read from the ONNX initializers (and Constant nodes)
with the `onnx` package, no ONNX Runtime needed.

Where each tensor sits (the rules s3tokenizer's onnx2torch and onnx2torch_v3 apply):
convolutions by shape (the first takes the mel bins, the FSMN ones are depthwise, kernel 31);
every matrix product `/blocks.{i}/{attn/query|key|value|out, mlp/mlp.0|mlp.2}/MatMul` stored
(in, out), the transpose of torch's; their biases in the `.../Add` beside it; LayerNorm as one
LayerNormalization node (v2: weight, bias and epsilon) or decomposed (v1, v3: the weight in a
`{ln}/Mul`, the bias in a `{ln}/Add*`, the epsilon the scalar added to the variance); v1's
position table `*positional_embedding`, its codebook the (C, 4096) input of
`_codebook/Pow_1`; v2/v3's projection the MatMul under `quantizer` and its bias. The variant
comes from the graph, never from the file name (both v1 files are `speech_tokenizer_v1.onnx`):
a first convolution of stride 1 is v1 (50 Hz); a VQ codebook at stride 2 is v1_25hz; FSQ with
12 blocks is v3, otherwise v2.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from ...errors import CheckpointError
from .config import VARIANTS, S3Config

_BLOCK = re.compile(r"/blocks\.(\d+)/")
_LINEAR = re.compile(r"/blocks\.(\d+)/(attn/(?:query|key|value|out)|mlp/mlp\.[02])/(MatMul|Add)")
_NORM = re.compile(r"/blocks\.(\d+)/(attn_ln|mlp_ln)/")


def read_onnx(path: Path, variant: str | None = None
              ) -> tuple[dict[str, torch.Tensor], S3Config]:
    """(state dict in s3tokenizer's names, config) of an official S3 tokenizer ONNX file.
    `variant` overrides the one the graph implies (v2 and v3 differ only in their depth)."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise CheckpointError(f"{path}: reading an ONNX file needs the onnx package "
                              "(pip install 'audiotok[onnx]')") from None
    try:
        graph = onnx.load(str(path)).graph
    except Exception as e:  # noqa: BLE001 - a protobuf DecodeError, an OSError...
        raise CheckpointError(f"{path}: not a readable ONNX file ({e})") from None
    params = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    params[node.output[0]] = numpy_helper.to_array(a.t)

    def param(node, big: bool = True) -> np.ndarray | None:
        """The node's first input that is a parameter (more than one element if `big`)."""
        for name in node.input[1:] if node.op_type in ("MatMul", "Conv") else node.input:
            if name in params and (params[name].size > 1) == big:
                return params[name]
        return None

    sd: dict[str, np.ndarray] = {}
    eps: list[float] = []
    stride1 = None
    for node in graph.node:
        name, op = node.name, node.op_type
        block = _BLOCK.search(name)
        if op == "Conv" and node.input[1] in params:
            w = params[node.input[1]]
            bias = params.get(node.input[2]) if len(node.input) > 2 else None
            if w.shape[1] == 1 and block:  # depthwise: an FSMN memory
                sd[f"encoder.blocks.{block.group(1)}.attn.fsmn_block.weight"] = w
            elif "encoder.conv1.weight" not in sd:
                sd["encoder.conv1.weight"], sd["encoder.conv1.bias"] = w, bias
                stride1 = next((list(a.ints)[0] for a in node.attribute if a.name == "strides"),
                               1)
            else:
                sd["encoder.conv2.weight"], sd["encoder.conv2.bias"] = w, bias
        elif m := _LINEAR.search(name):
            key = f"encoder.blocks.{m.group(1)}.{m.group(2).replace('/', '.')}"
            key = key.replace("mlp.mlp.", "mlp.")
            p = param(node)
            if p is not None:
                sd[key + (".weight" if m.group(3) == "MatMul" else ".bias")] = \
                    p.T if m.group(3) == "MatMul" else p
        elif m := _NORM.search(name):
            key = f"encoder.blocks.{m.group(1)}.{m.group(2)}"
            if op == "LayerNormalization":
                sd[key + ".weight"], sd[key + ".bias"] = (params[node.input[1]],
                                                         params[node.input[2]])
                eps += [a.f for a in node.attribute if a.name == "epsilon"] or [1e-5]
            elif op in ("Mul", "Add") and (p := param(node)) is not None:
                sd[key + (".weight" if op == "Mul" else ".bias")] = p
            elif op == "Add" and (p := param(node, big=False)) is not None:
                eps.append(float(p.reshape(-1)[0]))
        elif "_codebook/Pow_1" in name and (p := param(node)) is not None:
            sd["quantizer._codebook.embed"] = p.T
        elif "quantizer" in name and op == "MatMul" and (p := param(node)) is not None \
                and p.shape[-1] == 8:  # (v1's search multiplies by its codebook here too)
            sd["quantizer._codebook.project_down.weight"] = p.T
        elif "quantizer" in name and op == "Add" and (p := param(node)) is not None \
                and p.size == 8:
            sd["quantizer._codebook.project_down.bias"] = p
    for name, value in params.items():
        if name.endswith("positional_embedding"):
            sd["encoder.positional_embedding"] = value
        elif name.endswith("fsmn_block.weight") and (m := re.search(r"blocks\.(\d+)", name)):
            sd[f"encoder.blocks.{m.group(1)}.attn.fsmn_block.weight"] = value
        elif name == "quantizer.project_in.bias":
            sd["quantizer._codebook.project_down.bias"] = value
    if "encoder.conv1.weight" not in sd:
        raise CheckpointError(f"{path}: not an S3 tokenizer ONNX file (no convolution over "
                              "mel bins)")
    tensors = {k: torch.from_numpy(np.array(v, dtype=np.float32, order="C"))
               for k, v in sd.items() if v is not None}
    vq = "quantizer._codebook.embed" in tensors
    layers = len({k.split(".")[2] for k in tensors if k.startswith("encoder.blocks.")})
    implied = "v1" if stride1 == 1 else "v1_25hz" if vq else "v3_25hz" if layers == 12 \
        else "v2_25hz"
    variant = variant or implied
    if variant not in VARIANTS or VARIANTS[variant].vq != vq or \
            VARIANTS[variant].conv1_stride != stride1:
        raise CheckpointError(f"{path}: this graph is an S3 tokenizer like {implied}, not "
                              f"{variant}")
    width = tensors["encoder.conv1.weight"].shape[0]
    # (an epsilon stored as float32: the float64 the model was exported with, e.g. 1e-5)
    ln_eps = float(f"{eps[0]:.6g}") if eps else 1e-5
    return tensors, S3Config(variant, width=width, heads=width // 64, layers=layers,
                             ln_eps=ln_eps)
