"""ONNX export without the exporter's second trace (export/onnx_direct.py): which graphs take
the direct path, that their ONNX results equal torch's, and that what could be observed
differently takes the exporter's usual path."""

import operator

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from audiotok.export import onnx_direct
from audiotok.export.onnx import export_graph
from audiotok.nn.tracing import graph_export

pytest.importorskip("onnxscript")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class EveryRewrite(torch.nn.Module):
    """Each operator onnx_direct rewrites, on tensors whose mutation nothing else sees."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.conv = torch.nn.Conv1d(2, 4, 3, padding=1)
        self.up = torch.nn.Parameter(torch.randn(4, 3, 4, generator=g) * 0.3)
        self.norms = torch.nn.Sequential(torch.nn.BatchNorm1d(4),
                                         torch.nn.BatchNorm1d(4, affine=False))
        for t in self.norms.state_dict().values():  # statistics and affine not trivial
            if t.is_floating_point():
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)

    def forward(self, x):
        y = self.norms(self.conv(x)).add_(0.5)  # in place on a fresh tensor; its size read after
        n = y.shape[-1]
        gram = torch.matmul(y, y.transpose(1, 2))[0].clamp_min_(0).sqrt_()  # through a view
        up = F.conv_transpose1d(F.elu(y), self.up, stride=2)[..., : 2 * n]
        mask = ((y > 0) & (y < 1)) | ((y > 2) ^ (y < -1))
        z = torch.polar(torch.ones_like(y), y)
        parts = z.real - z.imag
        casts = y.to(torch.float64).square().to(torch.float32)
        rest = (1.0 - y) * mask.to(y.dtype) + parts + casts
        return up.sum(1, keepdim=True) + rest.sum(1, keepdim=True).repeat_interleave(2, -1) \
            + gram.sum()


class ReadThroughAnEarlierView(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        v = h[:, :1]  # made before the mutation, read after it: it sees it
        h.add_(1)
        return h + v


class MutatedThroughAView(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        h[:, :1].mul_(3)
        return h + 1


class CastingInPlace(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        return h.add_(x.double() / 3)  # float32 += float64: the in-place form casts back


class MixedDtypes(torch.nn.Module):
    """Operators whose operands differ in dtype: the type-promotion pass casts them."""

    def forward(self, x):
        steps = torch.arange(x.shape[-1], device=x.device)  # int64
        count = (x > 0).sum(-1, keepdim=True)  # int64
        return x * steps + count / 3 + x.argmax(-1, keepdim=True) * 0.5


def program(module, x):
    with torch.no_grad(), graph_export():
        return torch.export.export(module, (x,), dynamic_shapes=({2: torch.export.Dim("t")},),
                                   strict=False)


def registry_ops():
    from torch.onnx._internal.exporter import _decomp, _registration

    return set(_decomp.get_onnx_implemented_overloads(
        _registration.ONNXRegistry.from_torchlib()))


def onnx_equals_torch(module, tmp_path, name):
    x = torch.randn(2, 2, 37)
    with torch.no_grad(), graph_export():
        export_graph(module, (x,), tmp_path / f"{name}.onnx", ["x"], ["y"],
                     {"x": {0: torch.export.Dim("b"), 2: torch.export.Dim("t")}}, {})
    graph = onnx.load(str(tmp_path / f"{name}.onnx")).graph  # no stack of the module's code
    assert not any(__file__ in p.value for node in graph.node for p in node.metadata_props)
    session = ort.InferenceSession(str(tmp_path / f"{name}.onnx"))
    for shape in ((2, 2, 37), (3, 2, 101)):
        x = torch.randn(*shape)
        with torch.no_grad():
            want = module(x.clone()).numpy()
        got = session.run(None, {"x": x.numpy()})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.__version__.startswith(onnx_direct.TESTED_TORCH),
                    reason="the direct path is for the torch versions it was checked against")
def test_every_rewrite_takes_the_direct_path_and_equals_torch(tmp_path):
    module = EveryRewrite().eval()
    p = program(module, torch.randn(2, 2, 37))
    implemented = registry_ops()
    before = {str(n.target) for n in p.graph.nodes if n.op == "call_function"}
    assert {"aten.add_.Tensor", "aten.clamp_min_.default", "aten.sqrt_.default",
            "aten.conv_transpose1d.default", "aten.__and__.Tensor", "aten.__or__.Tensor",
            "aten.__xor__.Tensor", "aten.real.default", "aten.imag.default",
            "aten.rsub.Scalar", "aten.to.dtype", "aten.square.default",
            "aten.batch_norm.default"} <= before
    assert onnx_direct._prepare(p, implemented)
    assert all(n.target in implemented or n.target in onnx_direct._ASSERTIONS
               or n.target is operator.getitem for n in p.graph.nodes if n.op == "call_function")
    onnx_equals_torch(module, tmp_path, "every")


@pytest.mark.skipif(not torch.__version__.startswith(onnx_direct.TESTED_TORCH),
                    reason="the direct path is for the torch versions it was checked against")
def test_type_promotion_gives_the_exporters_casts_without_rerunning_the_graph(tmp_path):
    from torch.onnx._internal.exporter import _fx_passes

    module, graphs = MixedDtypes(), []
    for promote in (onnx_direct._promote_types, _fx_passes.insert_type_promotion_nodes):
        p = program(module, torch.randn(2, 2, 37))
        assert onnx_direct._prepare(p, registry_ops())
        p.graph_module.recompile()
        promote(p.graph_module)
        graphs.append([(n.name, str(n.target), str(n.args), str(n.kwargs),
                        str(getattr(n.meta.get("val"), "dtype", None)),
                        str(getattr(n.meta.get("val"), "shape", None))) for n in p.graph.nodes])
    assert graphs[0] == graphs[1]
    assert sum("convert_element_type" in node[1] for node in graphs[0]) >= 3
    onnx_equals_torch(module, tmp_path, "mixed")


@pytest.mark.parametrize("module", [ReadThroughAnEarlierView(), MutatedThroughAView(),
                                    CastingInPlace()], ids=type)
def test_observable_mutations_take_the_usual_path(module, tmp_path):
    p = program(module, torch.randn(2, 2, 37))
    graph = [(n.target, n.args, n.kwargs) for n in p.graph.nodes]
    assert not onnx_direct._prepare(p, registry_ops())
    assert [(n.target, n.args, n.kwargs) for n in p.graph.nodes] == graph  # as it was
    onnx_equals_torch(module, tmp_path, type(module).__name__)


def test_the_exporter_is_patched_only_inside_and_only_for_checked_versions(monkeypatch):
    from torch.onnx._internal.exporter import _core

    usual = _core._prepare_exported_program_for_export
    with pytest.raises(RuntimeError, match="inside"):
        with onnx_direct.direct_translation():
            patched = _core._prepare_exported_program_for_export
            raise RuntimeError("inside")
    assert _core._prepare_exported_program_for_export is usual
    assert (patched is not usual) == torch.__version__.startswith(onnx_direct.TESTED_TORCH)
    monkeypatch.setattr(onnx_direct, "TESTED_TORCH", ("0.0.",))
    with onnx_direct.direct_translation():
        assert _core._prepare_exported_program_for_export is usual
