"""Graphs laid out as the official S3 tokenizer ONNX files are (the names s3tokenizer's
onnx2torch / onnx2torch_v3 read: shared/specs/s3_tokenizer.md, section 2.3), built with
onnx.helper from a reference model's weights. The real files cannot be fetched here; these
carry every name and storage rule the converters rely on (MatMul weights transposed, v1's
decomposed LayerNorm with its epsilon, v2's LayerNormalization nodes, v3's Constant-held
biases and named FSMN initializers), with one node per weight: not runnable graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

CONV_NAMES = {"v1": [f"onnx::Conv_{n}" for n in range(1519, 1523)],
              "v1_25hz": ["encoders.conv1.weight", "encoders.conv1.bias",
                          "encoders.conv2.weight", "encoders.conv2.bias"],
              "v2_25hz": [f"onnx::Conv_{n}" for n in range(2216, 2220)]}


class _Graph:
    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def init(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def const(self, value) -> str:
        self.count += 1
        out = f"const_{self.count}"
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=f"/Constant_{self.count}",
            value=numpy_helper.from_array(np.asarray(value, np.float32))))
        return out

    def node(self, op: str, name: str, inputs: list[str], **attrs) -> str:
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out


def build(sd: dict, variant: str, path: Path, eps: float = 1e-5) -> Path:
    """An ONNX file of `variant` holding state dict `sd` (s3tokenizer's names) as the
    official file of that variant stores it."""
    sd = {k: v.detach().numpy() for k, v in sd.items()}
    g = _Graph()
    x = "mel"
    stride = 1 if variant == "v1" else 2
    if variant == "v3_25hz":
        names = [None] * 4
    else:
        names = CONV_NAMES[variant]
    for j, conv in enumerate(("conv1", "conv2")):
        w = sd[f"encoder.{conv}.weight"]
        b = sd[f"encoder.{conv}.bias"]
        if names[0] is None:
            inputs = [g.init(f"onnx::Conv_w{j}", w), g.init(f"onnx::Conv_b{j}", b)]
        else:
            inputs = [g.init(names[2 * j], w), g.init(names[2 * j + 1], b)]
        x = g.node("Conv", f"/{conv}/Conv", [x, *inputs], strides=[stride if j == 0 else 2],
                   kernel_shape=[3], pads=[1, 1])
    if variant.startswith("v1"):
        x = g.node("Add", "/Add", [x, g.init("encoders.positional_embedding",
                                            sd["encoder.positional_embedding"])])
    blocks = sorted({int(k.split(".")[2]) for k in sd if k.startswith("encoder.blocks.")})
    for i in blocks:
        p = f"encoder.blocks.{i}."
        for ln in ("attn_ln", "mlp_ln"):
            w, b = sd[p + ln + ".weight"], sd[p + ln + ".bias"]
            scope = f"/blocks.{i}/{ln}"
            if variant == "v2_25hz":
                x = g.node("LayerNormalization", f"{scope}/LayerNormalization",
                           [x, g.init(f"onnx::LN_{i}_{ln}_w", w),
                            g.init(f"onnx::LN_{i}_{ln}_b", b)],
                           epsilon=eps, axis=-1)
                continue
            v = g.node("ReduceMean", f"{scope}/ReduceMean", [x])
            v = g.node("Pow", f"{scope}/Pow", [v, g.const(2.0)])
            if variant == "v3_25hz":  # epsilon from a Constant, the bias too
                v = g.node("Add", f"{scope}/Add", [v, g.const(eps)])
                v = g.node("Mul", f"{scope}/Mul", [v, g.init(f"onnx::Mul_{i}_{ln}", w)])
                x = g.node("Add", f"{scope}/Add_1", [v, g.const(b)])
            else:  # v1: initializers throughout
                v = g.node("Add", f"{scope}/Add", [v, g.init(f"onnx::Add_{i}_{ln}_eps", eps)])
                v = g.node("Mul", f"{scope}/Mul", [v, g.init(f"onnx::Mul_{i}_{ln}", w)])
                x = g.node("Add", f"{scope}/Add_1", [g.init(f"onnx::Add_{i}_{ln}", b), v])
        for lin in ("attn.query", "attn.key", "attn.value", "attn.out", "mlp.0", "mlp.2"):
            scope = f"/blocks.{i}/" + lin.replace(".", "/").replace("mlp/", "mlp/mlp.")
            y = g.node("MatMul", f"{scope}/MatMul",
                       [x, g.init(f"onnx::MatMul_{i}_{lin}", sd[p + lin + ".weight"].T)])
            if p + lin + ".bias" in sd:
                bias = sd[p + lin + ".bias"]
                bias_in = g.const(bias) if variant == "v3_25hz" else \
                    g.init(f"onnx::Add_{i}_{lin}", bias)
                y = g.node("Add", f"{scope}/Add", [bias_in, y])
            x = y
        if p + "attn.fsmn_block.weight" in sd:
            w = sd[p + "attn.fsmn_block.weight"]
            name = f"blocks.{i}.attn.fsmn_block.weight" if variant == "v3_25hz" else \
                f"onnx::Conv_fsmn_{i}"
            x = g.node("Conv", f"/blocks.{i}/attn/fsmn_block/Conv", [x, g.init(name, w)],
                       group=w.shape[0], kernel_shape=[w.shape[-1]])
    if variant.startswith("v1"):
        embed = g.init("onnx::Pow_codebook", sd["quantizer._codebook.embed"].T)
        g.node("MatMul", "/quantizer/rq/model/layers.0/_codebook/MatMul", [x, embed])
        x = g.node("Pow", "/quantizer/rq/model/layers.0/_codebook/Pow_1",
                   [embed, g.const(2.0)])
    else:
        name = "onnx::MatMul_2536" if variant == "v2_25hz" else "onnx::MatMul_4410"
        x = g.node("MatMul", "/quantizer/project_down/MatMul",
                   [x, g.init(name, sd["quantizer._codebook.project_down.weight"].T)])
        x = g.node("Add", "/quantizer/project_down/Add",
                   [g.init("quantizer.project_in.bias",
                           sd["quantizer._codebook.project_down.bias"]), x])
    graph = helper.make_graph(
        g.nodes, "s3tokenizer",
        [helper.make_tensor_value_info("mel", onnx.TensorProto.FLOAT, ["B", 128, "T"]),
         helper.make_tensor_value_info("mel_len", onnx.TensorProto.INT32, ["B"])],
        [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, None)], g.inits)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph), str(path))
    return path
