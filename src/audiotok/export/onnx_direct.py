"""Translate a traced graph to ONNX without the exporter's second trace, where that is exact.

torch.onnx.export traces a model once (torch.export: ATen operators) and then traces the result
again (ExportedProgram.run_decompositions) to make it functional and to lower the operators ONNX
has no translation for. When every operator of the first trace already has a translation, or
has one after a rewrite of that node alone (below), the second trace changes nothing and costs
more than the first. `direct_translation()` skips it for such graphs: each node is rewritten in
place, the exporter's own type-promotion and assertion-removal passes run as they would (the
first without re-running the nodes it leaves alone), and a graph holding anything else (an
operator without a translation, an in-place operator whose mutation something could observe, a
higher-order operator) takes the exporter's usual path.
Only for the torch versions whose exporter internals this was checked against (TESTED_TORCH);
with others every graph takes the usual path.

The rewrites:
- an in-place operator on a tensor that nothing reads afterwards but through its result
  (y = x.add_(h), x made by an operator, or a view of such a tensor that nothing else reads):
  its functional form (x.add(h)), when the operands share the result's dtype (the in-place form
  casts back, the functional one would not);
- the Python operators' ATen names (__and__, __or__, __xor__) -> bitwise_and/or/xor;
- x.to(dtype) on the same device -> _to_copy(x, dtype) (what the decomposition gives);
- square(x) -> pow(x, 2); conv_transpose1d/2d -> convolution(transposed=True);
- real(z), imag(z) -> select(view_as_real(z), -1, 0 or 1); rsub(x, c) -> add(neg(x), c);
- batch_norm(training=False) -> the first output of _native_batch_norm_legit_no_training.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Iterator

import torch

TESTED_TORCH = ("2.13.",)
_LOCK = threading.Lock()
aten = torch.ops.aten

_ASSERTIONS = {aten._assert_tensor_metadata.default, aten._assert_scalar.default,
               aten._assert_async.default, aten._assert_async.msg,
               aten.sym_constrain_range_for_size.default}
_BITWISE = {getattr(aten, f"__{name}__").Tensor: getattr(aten, f"bitwise_{name}").Tensor
            for name in ("and", "or", "xor")} | \
           {getattr(aten, f"__{name}__").Scalar: getattr(aten, f"bitwise_{name}").Scalar
            for name in ("and", "or", "xor")}
_CASTS = {aten.to.dtype, aten.to.device, aten.to.dtype_layout}
_METADATA = {aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default,
             aten.sym_storage_offset.default}  # read no data
_TRANSPOSED = {aten.conv_transpose1d.default: 1, aten.conv_transpose2d.input: 2}


def _val(x):
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else None


def _insert(node, op, *args) -> torch.fx.Node:
    """A new node op(*args) before `node`, its value's metadata computed as the trace would."""
    with node.graph.inserting_before(node):
        new = node.graph.call_function(op, args)
    new.meta["val"] = op(*[_val(a) if isinstance(a, torch.fx.Node) else a for a in args])
    return new


def _rewrite(node, implemented, inserted: list) -> bool:
    """Rewrite `node` in place into operators the registry translates (new nodes it needs go to
    `inserted`); False if it cannot."""
    op = node.target
    if op in implemented or op in _ASSERTIONS or op is operator.getitem:
        return True
    if op in (aten.real.default, aten.imag.default):  # a complex tensor's parts
        pairs = _insert(node, aten.view_as_real.default, node.args[0])
        inserted.append(pairs)
        node.target, node.args = aten.select.int, (pairs, -1, int(op is aten.imag.default))
    elif op is aten.rsub.Scalar and node.kwargs.get("alpha", 1) == 1 and len(node.args) == 2:
        negated = _insert(node, aten.neg.default, node.args[0])  # other - x = -x + other
        inserted.append(negated)
        node.target, node.args = aten.add.Tensor, (negated, node.args[1])
    elif op is aten.batch_norm.default and len(node.args) == 9 and node.args[5] is False \
            and node.args[3] is not None and node.args[4] is not None:  # eval, running stats
        x, weight, bias, mean, var, _, momentum, eps, _ = node.args
        norm = _insert(node, aten._native_batch_norm_legit_no_training.default, x, weight, bias,
                       mean, var, momentum, eps)  # (output, saved mean, saved rstd)
        inserted.append(norm)
        node.target, node.args = operator.getitem, (norm, 0)
        return norm.target in implemented
    elif op in _BITWISE:
        node.target = _BITWISE[op]
    elif op in _CASTS:
        x, out = _val(node.args[0]), _val(node)
        if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) \
                or x.device != out.device:
            return False
        node.target, node.args, node.kwargs = aten._to_copy.default, node.args[:1], \
            {"dtype": out.dtype}
    elif op is aten.square.default:
        node.target, node.args = aten.pow.Tensor_Scalar, (node.args[0], 2)
    elif op in _TRANSPOSED:
        dims = _TRANSPOSED[op]
        x, w, b, stride, padding, output_padding, groups, dilation = (
            *node.args, *[None] * (8 - len(node.args)))
        node.target = aten.convolution.default
        node.args = (x, w, b, stride or [1] * dims, padding or [0] * dims,
                     dilation or [1] * dims, True, output_padding or [0] * dims, groups or 1)
    else:
        return False
    return node.target in implemented


def _aliases(node) -> bool:
    """Whether `node`'s output may share memory with an input (views, in-place results), or
    is unknown."""
    op = node.target
    if op is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return _aliases(node.args[0])  # one output of a multi-output operator
    if not isinstance(op, torch._ops.OpOverload):
        return True
    return any(r.alias_info is not None for r in op._schema.returns)


def _unobserved(x, node, position: dict) -> bool:
    """Whether no node but `node` sees `node` mutate x: x is made by an operator, and nothing
    reads it after `node` or through another view; if x is a view, the same of its base."""
    mutation, child = position[node], node
    while True:
        if not isinstance(x, torch.fx.Node):
            return False
        made = x.args[0] if x.target is operator.getitem else x  # (of a multi-output operator)
        if not isinstance(made, torch.fx.Node) or made.op != "call_function" \
                or not isinstance(made.target, torch._ops.OpOverload) \
                or made.target._schema.is_mutable:
            return False
        for user in x.users:
            if user is not child and user.target not in _METADATA and \
                    (position[user] > mutation or _aliases(user)):
                return False
        if not _aliases(x):
            return True
        x, child = x.args[0], x  # a view: its base is mutated too


def _functional(node, position: dict):
    """The functional form of in-place `node` where it computes the same (module docstring);
    None otherwise."""
    op = node.target
    schema = op._schema
    first = schema.arguments[0] if schema.arguments else None
    if not schema.name.endswith("_") or first is None or first.alias_info is None \
            or not first.alias_info.is_write:
        return None
    packet = getattr(aten, schema.name.split("::")[1][:-1], None)
    functional = getattr(packet, op._overloadname, None)
    if functional is None or functional._schema.is_mutable or \
            not _unobserved(node.args[0], node, position):
        return None
    out = _val(node)
    for arg in (*node.args, *node.kwargs.values()):
        val = _val(arg)
        if isinstance(val, torch.Tensor) and (out is None or val.dtype != out.dtype):
            return None
    return functional


def _prepare(program, implemented) -> bool:
    """Rewrite `program`'s nodes in place so that the registry translates each; False, with the
    program as it was, where some node cannot be."""
    signature = program.graph_signature
    if signature.buffers_to_mutate or signature.user_inputs_to_mutate:
        return False
    if len(list(program.graph_module.modules())) != 1:  # higher-order operators (cond, ...)
        return False
    nodes = list(program.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    saved = {node: (node.target, node.args, node.kwargs) for node in nodes}
    inserted = []
    for node in nodes:
        if node.op == "get_attr":
            ok = False
        elif node.op != "call_function":
            continue
        elif isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable:
            # rewritten, the node's output is fresh: an in-place operator on it may follow
            functional = _functional(node, position)
            ok = functional is not None
            if ok:
                node.target = functional
                ok = _rewrite(node, implemented, inserted)
        else:
            ok = _rewrite(node, implemented, inserted)
        if not ok:
            for n, (target, args, kwargs) in saved.items():
                n.target, n.args, n.kwargs = target, args, kwargs
            for n in reversed(inserted):
                program.graph.erase_node(n)
            return False
    return True


def _promote_types(module: torch.fx.GraphModule) -> None:
    """The exporter's type-promotion pass (explicit casts where an operator's operands differ
    in dtype), reusing each node's traced value where the pass would re-run the node only to
    learn it: the first trace's values are the re-run's (same fake tensors, same symbolic
    shapes), and a node the pass changes is still re-run, as are the casts it inserts."""
    from torch.onnx._internal.fx.passes import type_promotion as tp

    class Promotion(tp._TypePromotionInterpreter):
        def run_node(self, n):
            if n.op != "call_function" or "val" not in n.meta:
                return super().run_node(n)
            with self._set_current_node(n):
                if rule := tp.get_type_promotion_rule(n, self.type_promotion_table):
                    self._maybe_promote_node(n, rule)
            return self.env[n] if n in self.env else n.meta["val"]

    promotion = tp.InsertTypePromotion(module)
    promotion.interpreter = Promotion(module, promotion.interpreter.type_promotion_table)
    promotion.run()


@contextlib.contextmanager
def direct_translation() -> Iterator[None]:
    """Within this block, torch.onnx.export(dynamo=True) translates graphs that need no second
    trace straight from their first (see the module's docstring)."""
    if not torch.__version__.startswith(TESTED_TORCH):
        yield
        return
    from torch.onnx._internal.exporter import _core, _decomp, _fx_passes

    usual = _core._prepare_exported_program_for_export

    def prepare(program, *, registry):
        if not _prepare(program, set(_decomp.get_onnx_implemented_overloads(registry))):
            return usual(program, registry=registry)
        module = program.graph_module
        module.recompile()
        _promote_types(module)
        program._graph_module = _fx_passes.remove_assertion_nodes(module)
        return program

    with _LOCK:
        _core._prepare_exported_program_for_export = prepare
        try:
            yield
        finally:
            _core._prepare_exported_program_for_export = usual
