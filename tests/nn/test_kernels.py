"""nn/kernels: the few-row product forms and short convolutions give F.linear's and
F.conv1d's results under each rule; the rules follow the CPU, the environment and a
calibration file; a calibration measures this machine and writes a file that later loads
read."""

import contextlib
import json

import pytest
import torch
import torch.nn.functional as F

from audiotok.nn import kernels as K
from audiotok.nn.kernels import calibrate
from audiotok.nn.kernels import derivations as D
from audiotok.nn.kernels import products as P
from audiotok.nn.kernels import ruleset as R
from audiotok.nn.kernels.cpu import Cpu
from audiotok.nn.linear import Linear
from audiotok.nn.tracing import graph_export


def _close(got, ref):
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


@pytest.fixture
def use():
    """use(products): the product rule for the rest of the test (packed weights with the
    oneDNN rule, as on the CPUs that take it)."""
    with contextlib.ExitStack() as stack:
        def choose(products: str, **changes):
            changes = {"packed": products == "onednn", **changes}
            stack.enter_context(R.use_rules(R.AMD_AVX512, products=products, **changes))
            assert P.onednn_rule() == (products == "onednn")

        yield choose


@pytest.fixture(params=["mkl", "onednn"])
def rule(request, use):
    """Each product rule, whichever this CPU would pick."""
    use(request.param)
    return request.param


@pytest.mark.parametrize("shape", [(1, 48), (1, 1, 48), (2, 48), (2, 3, 48), (64, 48),
                                   (65, 48), (0, 48), (3, 0, 48), (7, 48), (8, 48), (300, 48)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_equals_f_linear(shape, bias, rule):
    torch.manual_seed(0)
    layer, ref = Linear(48, 40, bias=bias), torch.nn.Linear(48, 40, bias=bias)
    ref.load_state_dict(layer.state_dict())  # same parameters, same keys
    x = torch.randn(*shape)
    with torch.no_grad():
        got = layer(x)
        _close(got, ref(x))
    assert got.shape == (*shape[:-1], 40) and got.is_contiguous()


def test_linear_on_strided_inputs(rule):
    """A permuted input (ConvNeXt's [B, T, C] view of [B, C, T]) and a sliced one."""
    w, b = torch.randn(40, 48), torch.randn(40)
    for x in (torch.randn(1, 48, 4).permute(0, 2, 1), torch.randn(6, 96)[:, ::2],
              torch.randn(1, 48, 1).permute(0, 2, 1), torch.randn(2, 48, 30).permute(0, 2, 1)):
        _close(K.linear(x, w, b), F.linear(x, w, b))


def test_linear_falls_back_exactly_where_it_should(use):
    """Other dtypes, many rows (under the MKL rule), autograd and graph export take F.linear
    itself: equal bits."""
    use("mkl")
    w, x = torch.randn(40, 48), torch.randn(4, 48)
    bf = K.linear(x.bfloat16(), w.bfloat16())
    assert torch.equal(bf, F.linear(x.bfloat16(), w.bfloat16()))
    big = torch.randn(R.rules().few_rows + 1, 48)
    assert torch.equal(K.linear(big, w), F.linear(big, w))
    with graph_export():
        assert torch.equal(K.linear(x, w), F.linear(x, w))
    wg = w.clone().requires_grad_()
    y = K.linear(x, wg)
    assert torch.equal(y, F.linear(x, wg))
    y.sum().backward()
    torch.testing.assert_close(wg.grad, x.sum(0).expand(40, -1))


@pytest.mark.parametrize("rows", [1, 8, 100])
def test_without_onednn(monkeypatch, use, rows):
    """A build whose oneDNN linear raises: the rows go the general way, from then on, under
    the MKL rule."""
    def broken(*args):
        raise RuntimeError("could not create a primitive descriptor")

    use("onednn")
    monkeypatch.setitem(P._ONEDNN, "ok", True)
    monkeypatch.setattr(P, "onednn_linear", broken)
    w, b, x = torch.randn(40, 48), torch.randn(40), torch.randn(rows, 48)
    _close(K.linear(x, w, b), F.linear(x, w, b))
    assert P._ONEDNN["ok"] is False and not P.onednn_rule()
    _close(K.linear(x, w, b), F.linear(x, w, b))
    assert P.onednn_product(x, w) is None
    assert torch.equal(K.rule_product(x, w, lambda: x @ w.t(), min_rows=1), x @ w.t())


def _cpu(vendor: str, *flags: str) -> Cpu:
    return Cpu(vendor, "test", "0/0", frozenset(flags))


def test_the_rules_follow_the_cpu(monkeypatch):
    """The table: MKL's rule on Intel CPUs (and where /proc/cpuinfo names no vendor), the
    oneDNN rule with packed weights elsewhere; each CPU class's row says where it came from."""
    monkeypatch.setattr(R, "onednn_available", lambda: True)
    for cpu, products, packed, short in [
            (_cpu("GenuineIntel", "avx2", "avx512f", "amx_bf16"), "mkl", False, 256),
            (_cpu("GenuineIntel", "avx2"), "mkl", False, 256),
            (_cpu("AuthenticAMD", "avx2", "avx512f"), "onednn", True, 256),
            (_cpu("AuthenticAMD", "avx2"), "onednn", True, 256),
            (_cpu("HygonGenuine", "avx2"), "onednn", True, 256),
            (_cpu(""), "mkl", False, 256)]:
        got = R.default_rules(cpu)
        assert (got.products, got.packed, got.short_conv_rows) == (products, packed, short), cpu
        assert got.source.startswith("default: "), got
    monkeypatch.setattr(R, "onednn_available", lambda: False)
    assert R.default_rules(_cpu("AuthenticAMD", "avx512f")).products == "mkl"
    assert _cpu("GenuineIntel", "avx2", "avx512f", "amx_bf16").describe() == \
        "GenuineIntel test (family 0/0, AVX-512 + AMX)"
    assert _cpu("A", "avx2").key() != _cpu("A", "avx2", "avx512f").key()


def test_the_rules_follow_the_environment_and_a_calibration(monkeypatch, tmp_path):
    """AUDIOTOK_KERNELS=default: the table; a path: that file; unset: this machine's
    calibration if there is one. AUDIOTOK_CPU_GEMM overrides the product rule; wrong values
    and unreadable files are clear errors."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("AUDIOTOK_CPU_GEMM", raising=False)
    monkeypatch.setenv("AUDIOTOK_KERNELS", "default")
    monkeypatch.setattr(R, "_RULES", [])
    table = R.default_rules(R.this_cpu())
    assert R.rules() == table
    mine = R.Rules("mkl", packed=False, short_conv_rows=32, source="x")
    calibrate.save(mine, {"cpu": "test"})  # this machine's calibration file
    assert R.calibration_file().parent == tmp_path / "cache" / "audiotok"
    R.reset()
    assert R.rules() == table  # (default: the table, not the file)
    monkeypatch.delenv("AUDIOTOK_KERNELS")
    R.reset()
    got = R.rules()
    assert (got.products, got.short_conv_rows) == ("mkl", 32)
    assert got.source == f"calibrated: {R.calibration_file()}"
    other = tmp_path / "rules.json"
    calibrate.save(R.Rules("mkl", packed=False, short_conv_rows=128), {}, other)
    monkeypatch.setenv("AUDIOTOK_KERNELS", str(other))
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", " ONEDNN ")
    R.reset()
    got = R.rules()
    assert got.short_conv_rows == 128
    assert got.products == ("onednn" if R.onednn_available() else "mkl")
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", "openblas")
    R.reset()
    with pytest.raises(ValueError, match="AUDIOTOK_CPU_GEMM must be onednn or mkl"):
        R.rules()
    monkeypatch.delenv("AUDIOTOK_CPU_GEMM")
    other.write_text(json.dumps({"rules": {"products": "blas", "packed": False}}))
    R.reset()
    with pytest.raises(ValueError, match="rules.json: not a kernel rules file"):
        R.rules()
    other.write_text("{")
    R.reset()
    with pytest.raises(ValueError, match="not a kernel rules file"):
        R.rules()
    monkeypatch.undo()
    R.reset()


def test_a_calibration_measures_every_choice(monkeypatch, tmp_path):
    """calibrate() times each choice here (a quick run) and returns rules within the
    measured ranges, with the timings behind them; save() writes what rules() reads."""
    lines = []
    rules, found = calibrate.calibrate(rounds=1, log=lines.append)
    assert rules.products in ("onednn", "mkl") and rules.source.startswith("calibrated on ")
    assert rules.short_conv_rows in calibrate.CONV_ROWS
    assert rules.transposed_rows in (*calibrate.TRANSPOSED_ROWS, 2 * calibrate.TRANSPOSED_ROWS[-1])
    assert found["threads"] == torch.get_num_threads() and found["short_conv"]
    assert len(lines) >= 3 and lines[0].startswith("products: ") == R.onednn_available()
    path = calibrate.save(rules, found, tmp_path / "k.json")
    assert R.read_rules(path).short_conv_rows == rules.short_conv_rows
    assert json.loads(path.read_text())["measured"]["cpu"] == R.this_cpu().describe()


def test_onednn_rule_calls_onednn_from_8_rows(monkeypatch, use):
    """Under the oneDNN rule: 1 row and from onednn_rows rows on (any number) oneDNN's linear,
    2..7 rows W @ x^T; onednn_product answers for any rows; rule_product takes oneDNN's from
    its rows on, float32, without autograd, and the reference's call otherwise."""
    use("onednn")
    calls = []
    real = P.onednn_linear
    monkeypatch.setattr(P, "onednn_linear", lambda *a: calls.append(a[0].shape) or real(*a))
    w, b = torch.randn(40, 48), torch.randn(40)
    for rows in (1, 2, 7, 8, 64, 65, 1000):
        calls.clear()
        x = torch.randn(rows, 48)
        _close(K.linear(x, w, b), F.linear(x, w, b))
        assert bool(calls) == (rows == 1 or rows >= R.rules().onednn_rows), rows
    x = torch.randn(8, 48)
    for rows in (1, 2, 8):
        _close(P.onednn_product(x[:rows], w), F.linear(x[:rows], w))
    reference = []
    def ref(x=x, w=w):
        reference.append(1)
        return x @ w.t()
    calls.clear()
    _close(K.rule_product(x, w, ref), x @ w.t())
    assert calls and not reference
    K.rule_product(x[:7], w, lambda: ref(x[:7]))
    assert reference == [1]
    K.rule_product(x[:2], w, lambda: ref(x[:2]), min_rows=1)
    assert reference == [1]
    K.rule_product(x.double(), w.double(), lambda: ref(x.double(), w.double()))
    with torch.enable_grad():
        K.rule_product(x, w.clone().requires_grad_(), ref)
    use("mkl")
    K.rule_product(x, w, ref)
    assert reference == [1, 1, 1, 1]


def test_packed_weights_in_a_streaming_step(monkeypatch, use):
    """Inside packed_weights(), under the oneDNN rule, 2..few_rows rows of a parameter's
    product run on its packed copy (made once, kept while the weight is unchanged): from
    onednn_rows rows on the dense oneDNN linear's bits, below within rounding. One row, more
    rows, a temporary weight, the MKL rule and outside the context: no copy."""
    if not P._ONEDNN["packed"]:
        pytest.skip("this torch has no oneDNN weight packing")
    use("onednn")
    packed = _spy_packing(monkeypatch)
    layer = Linear(48, 40)
    with torch.no_grad():
        for rows in (1, 2, 7, 8, 64, 65):
            x = torch.randn(rows, 48)
            dense = K.linear(x, layer.weight, layer.bias)
            with K.packed_weights():
                got = layer(x)
            if R.rules().onednn_rows <= rows <= R.rules().few_rows:
                assert torch.equal(got, dense), rows
            _close(got, F.linear(x, layer.weight, layer.bias))
        assert packed == [(40, 48)]  # packed once, for 2 rows, and kept
        layer.weight.mul_(2)  # a changed weight is packed again
        with K.packed_weights():
            x = torch.randn(4, 48)
            _close(layer(x), F.linear(x, layer.weight, layer.bias))
            temporary = layer.weight * 1
            _close(K.linear(x, temporary), F.linear(x, temporary))
        assert len(packed) == 2
        _close(layer(x), F.linear(x, layer.weight, layer.bias))  # outside: the dense forms
        use("mkl")
        with K.packed_weights():
            _close(layer(x), F.linear(x, layer.weight, layer.bias))
        use("onednn", packed=False)  # a CPU whose rules do not pack
        with K.packed_weights():
            _close(layer(x * 2), F.linear(x * 2, layer.weight, layer.bias))
        assert len(packed) == 2


def test_streaming_convolutions_pack_their_weights(monkeypatch, use):
    """A causal convolution's streaming step packs its (taps-reshaped) weight once and keeps
    giving the offline samples."""
    from audiotok.nn.conv import CausalConv1d
    from audiotok.nn.streaming import streaming

    if not P._ONEDNN["packed"]:
        pytest.skip("this torch has no oneDNN weight packing")
    use("onednn")
    packed = _spy_packing(monkeypatch)
    torch.manual_seed(0)
    conv = CausalConv1d(24, 32, 3)
    x = torch.randn(2, 24, 12)
    with torch.no_grad():
        want = conv(x)
        with streaming(conv):
            got = torch.cat([conv(x[..., i : i + 2]) for i in range(0, 12, 2)], -1)
    _close(got, want)
    assert packed == [(32, 72)]


def test_offline_pieces_do_not_pack(monkeypatch, use, s2_codec):
    """A long offline decode and encode run the causal codec's stream in pieces, the last one
    short: inside packed_weights(False) no step packs, and the results are the one-pass ones;
    the same tokens pushed through a library stream do pack."""
    if not P._ONEDNN["packed"]:
        pytest.skip("this torch has no oneDNN weight packing")
    use("onednn")
    packed = _spy_packing(monkeypatch)
    with K.packed_weights(False), K.packed_weights():
        x = torch.randn(3, 48)
        layer = Linear(48, 40)
        _close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert packed == []
    torch.manual_seed(0)
    chunk = s2_codec.streaming.pieces
    tokens = torch.stack([torch.randint(0, n, (chunk + 3,)) for n in s2_codec.codebook_sizes])
    audio = s2_codec.decode(tokens[None])
    codes = s2_codec.encode(audio[0], s2_codec.sample_rate)
    assert packed == []
    with s2_codec.stream_decoder() as dec:
        streamed = torch.cat([dec.push(tokens[None, :, i : i + 1]) for i in range(chunk + 3)], -1)
    assert packed  # a stream's few-row products
    _close(streamed, audio[..., : streamed.shape[-1]])
    assert codes.tokens.shape[-1] == chunk + 3


def _spy_packing(monkeypatch) -> list:
    """The shapes of the weights the products pack from now on (the copies other tests made
    dropped first, so that a packing step calls pack again)."""
    for slot in [k for k in D._CACHE if k[1] == "onednn packed"]:
        D._CACHE.pop(slot, None)
    packed, real = [], P.pack
    monkeypatch.setattr(P, "pack", lambda w: packed.append(tuple(w.shape)) or real(w))
    return packed


# output rows (batch x steps): 1 (oneDNN), 2..16 (W @ taps^T), 17..256 in float32 (W @ taps,
# one row of the batch as a view, several as a copy), beyond (conv1d)
SHORT_CONVS = [(1, 1, 1, 1), (1, 7, 7, 1), (1, 16, 3, 1), (3, 10, 3, 2), (2, 40, 7, 3),
               (1, 32, 7, 9), (4, 32, 1, 1), (1, 256, 2, 1), (2, 150, 3, 1)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch,length,kernel,dilation", SHORT_CONVS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("stride", [1, 4])
def test_short_conv1d_equals_conv1d(dtype, batch, length, kernel, dilation, bias, stride, rule):
    torch.manual_seed(1)
    if stride > 1:  # as a strided streaming convolution sees it: kernel 2 x stride
        kernel, dilation = 2 * stride, 1
    x = torch.randn(batch, 16, length * stride + (kernel - stride) * dilation, dtype=dtype)
    w = torch.randn(8, 16, kernel, dtype=dtype)
    b = torch.randn(8, dtype=dtype) if bias else None
    got = K.short_conv1d(x, w, b, dilation, stride)
    # in float32: oneDNN's strided bfloat16 kernel is wrong on AMX CPUs (see kernels.conv1d)
    ref = F.conv1d(x.float(), w.float(), None if b is None else b.float(), stride,
                   dilation=dilation).to(dtype)
    assert got.shape == ref.shape
    tol = 1e-5 if dtype == torch.float32 else 0.1
    torch.testing.assert_close(got.float(), ref.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("form", ["mkl", "onednn"])
def test_short_conv1d_runs_up_to_its_rows_as_one_product(monkeypatch, use, form):
    """taps_rows..short_conv_rows (17..256) output rows in float32 never reach a convolution
    kernel: under the MKL rule they run as W @ taps (not linear), under the oneDNN rule
    through linear; 257 do."""
    from audiotok.nn.kernels import convs as conv

    use(form, short_conv_rows=256)
    real_linear = conv.linear

    def refused(*args, **kw):
        raise AssertionError("another form called")

    torch.manual_seed(2)
    w, b = torch.randn(8, 16, 3), torch.randn(8)
    cases = [torch.randn(batch, 16, steps + 2) for batch, steps in [(1, 17), (4, 64), (1, 256)]]
    refs = [F.conv1d(x, w, b) for x in cases]
    monkeypatch.setattr(conv.F, "conv1d", refused)
    monkeypatch.setattr(conv, "conv2d_nwc", refused)
    monkeypatch.setattr(conv, "linear", refused if form == "mkl" else real_linear)
    for x, ref in zip(cases, refs, strict=True):
        torch.testing.assert_close(K.short_conv1d(x, w, b), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="another form called"):
        K.short_conv1d(torch.randn(1, 16, 259), w, b)


def _within_steps(got, ref, steps=1.0):
    """got within `steps` rounding steps of its dtype (at ref's largest value) of ref."""
    scale = ref.float().abs().max() * torch.finfo(got.dtype).eps
    assert (got.float() - ref.float()).abs().max() <= steps * scale


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_convolutions_without_kernels_run_in_float32(monkeypatch, dtype):
    """Where oneDNN has no kernels for the dtype (forced here on any CPU) the convolution forms
    compute in float32 on exact copies and round: within one rounding step of the float32
    result of the same operands (torch's reference kernel sums in float32 too); where it has
    them, torch's own kernel runs (the same result bit for bit)."""
    from audiotok.nn.kernels import convs

    g = torch.Generator().manual_seed(5)
    x = (0.3 * torch.randn(2, 16, 301, generator=g)).to(dtype)
    w = (0.2 * torch.randn(24, 16, 7, generator=g)).to(dtype)
    wt = (0.2 * torch.randn(16, 8, 8, generator=g)).to(dtype)
    b = (0.1 * torch.randn(24, generator=g)).to(dtype)
    f = [t.float() for t in (x, w, wt, b)]
    forms = {
        "conv1d": (lambda: K.conv1d(x, w, b, 3, 2), lambda: F.conv1d(f[0], f[1], f[3], 3, 0, 2),
                   lambda: F.conv1d(x, w, b, 3, 0, 2)),
        "padded": (lambda: K.conv1d_padded(x, w, b, 1, 3), lambda: F.conv1d(f[0], f[1], f[3], 1, 3),
                   lambda: F.conv1d(x, w, b, 1, 3)),
        "reflect": (lambda: K.conv1d_padded(x, w, None, 2, (3, 2), mode="reflect"),
                    lambda: F.conv1d(F.pad(f[0], (3, 2), mode="reflect"), f[1], None, 2),
                    lambda: F.conv1d(F.pad(x, (3, 2), mode="reflect"), w, None, 2)),
        "transposed": (lambda: K.conv_transpose1d_padded(x, wt, None, 4, 2),
                       lambda: F.conv_transpose1d(f[0], f[2], None, 4, 2),
                       lambda: F.conv_transpose1d(x, wt, None, 4, 2)),
    }
    copies = []  # the float32 copies of weights the route makes
    monkeypatch.setattr(convs, "float32", lambda t: copies.append(t) or (
        None if t is None else t.float()))
    monkeypatch.setattr(convs, "reduced_conv_kernels", lambda _: False)
    for name, (form, float32, _) in forms.items():
        del copies[:]
        y = form()
        assert copies and y.dtype == dtype and y.shape == float32().shape, name
        _within_steps(y, float32(), 0.5 + 1e-3)
    monkeypatch.setattr(convs, "reduced_conv_kernels", lambda _: True)
    del copies[:]
    for name, (form, _, plain) in forms.items():
        assert torch.equal(form(), plain()), name
    assert not copies


def test_reduced_precision_swaps_torch_convolutions_where_kernels_lack(monkeypatch):
    """set_precision on a CPU without reduced kernels (forced): torch's zero-padded Conv1d and
    undilated ConvTranspose1d modules become audiotok's (the same parameters and names), others
    stay, and float32 islands too; with the kernels, nothing changes."""
    from torch import nn

    from audiotok.nn import conv, precision

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv1d(4, 8, 5, padding=2), nn.Conv1d(8, 8, 3, padding="same"),
                             nn.Conv1d(8, 8, 3, padding=1, padding_mode="reflect"),
                             nn.ConvTranspose1d(8, 8, 3, padding=1, dilation=2),
                             nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1))

    x = torch.randn(1, 4, 50)
    ref = model()(x)
    monkeypatch.setattr(precision, "reduced_conv_kernels", lambda _: False)
    island = model()
    precision.set_precision(island, torch.bfloat16, [island[0]])
    assert type(island[0]) is nn.Conv1d and island[0].weight.dtype == torch.float32
    m = precision.set_precision(model(), torch.bfloat16, [])
    assert [type(layer) for layer in m] == [conv.Conv1d, nn.Conv1d, nn.Conv1d,
                                            nn.ConvTranspose1d, conv.ConvTranspose1d]
    assert list(m.state_dict()) == list(model().state_dict())
    y = m(x.bfloat16())
    assert y.dtype == torch.bfloat16 and (y.float() - ref).abs().max() < 0.05 * ref.abs().max()
    monkeypatch.setattr(precision, "reduced_conv_kernels", lambda _: True)
    assert all(type(layer) in (nn.Conv1d, nn.ConvTranspose1d)
               for layer in precision.set_precision(model(), torch.bfloat16, []))


def test_full_attention_puts_no_bound_on_a_traced_length():
    """Under export the kernel choice never compares the traced length with the long-input
    threshold (torch.export would bound the length below it and capture the graph twice)."""

    class Attend(torch.nn.Module):
        def forward(self, q):
            return K.full_attention(q, q, q)

    q = torch.randn(1, 2, 40, 8)
    with graph_export():
        program = torch.export.export(
            Attend(), (q,), dynamic_shapes=({2: torch.export.Dim("t", min=2, max=1 << 20)},),
            strict=False)
    assert program.module()(torch.randn(1, 2, 700, 8)).shape == (1, 2, 700, 8)
