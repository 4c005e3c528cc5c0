"""The CPU few-row forms of linear and short_conv1d give F.linear's / F.conv1d's results."""

import pytest
import torch
import torch.nn.functional as F

from audiotok.nn import linear as L
from audiotok.nn.conv import short_conv1d
from audiotok.nn.tracing import graph_export


def _close(got, ref):
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def _use(monkeypatch, rule: str) -> None:
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", rule)
    L.gemm_backend.cache_clear()
    assert L.gemm_backend() == rule


@pytest.fixture(params=["mkl", "onednn"])
def rule(request, monkeypatch):
    """Each product rule of nn/linear.py, whichever this CPU would pick."""
    _use(monkeypatch, request.param)
    yield request.param
    monkeypatch.undo()
    L.gemm_backend.cache_clear()


@pytest.mark.parametrize("shape", [(1, 48), (1, 1, 48), (2, 48), (2, 3, 48), (64, 48),
                                   (65, 48), (0, 48), (3, 0, 48), (7, 48), (8, 48), (300, 48)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_equals_f_linear(shape, bias, rule):
    torch.manual_seed(0)
    layer, ref = L.Linear(48, 40, bias=bias), torch.nn.Linear(48, 40, bias=bias)
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
        _close(L.linear(x, w, b), F.linear(x, w, b))


def test_linear_falls_back_exactly_where_it_should(monkeypatch):
    """Other dtypes, many rows (under the MKL rule), autograd and graph export take F.linear
    itself: equal bits."""
    _use(monkeypatch, "mkl")
    w, x = torch.randn(40, 48), torch.randn(4, 48)
    bf = L.linear(x.bfloat16(), w.bfloat16())
    assert torch.equal(bf, F.linear(x.bfloat16(), w.bfloat16()))
    big = torch.randn(L.FEW_ROWS + 1, 48)
    assert torch.equal(L.linear(big, w), F.linear(big, w))
    with graph_export():
        assert torch.equal(L.linear(x, w), F.linear(x, w))
    wg = w.clone().requires_grad_()
    y = L.linear(x, wg)
    assert torch.equal(y, F.linear(x, wg))
    y.sum().backward()
    torch.testing.assert_close(wg.grad, x.sum(0).expand(40, -1))


@pytest.mark.parametrize("rows", [1, 8, 100])
def test_without_onednn(monkeypatch, rows):
    """A build whose oneDNN linear raises: the rows go the general way, from then on, under
    the MKL rule."""
    def broken(*args):
        raise RuntimeError("could not create a primitive descriptor")

    _use(monkeypatch, "onednn")
    monkeypatch.setitem(L._ONEDNN, "ok", True)
    monkeypatch.setattr(L, "_onednn_linear", broken)
    w, b, x = torch.randn(40, 48), torch.randn(40), torch.randn(rows, 48)
    _close(L.linear(x, w, b), F.linear(x, w, b))
    assert L._ONEDNN["ok"] is False and L.gemm_backend() == "mkl"
    _close(L.linear(x, w, b), F.linear(x, w, b))
    assert L.onednn_product(x, w) is None
    L.gemm_backend.cache_clear()


def test_the_rule_follows_the_cpu_and_the_environment(monkeypatch):
    """oneDNN where MKL runs its generic kernels (x86 CPUs not made by Intel); the variable
    overrides it; a wrong value is a clear error."""
    monkeypatch.delenv("AUDIOTOK_CPU_GEMM", raising=False)
    for vendor, rule in [("GenuineIntel", "mkl"), ("AuthenticAMD", "onednn"),
                         ("HygonGenuine", "onednn"), ("", "mkl")]:
        monkeypatch.setattr(L, "_cpu_vendor", lambda v=vendor: v)
        L.gemm_backend.cache_clear()
        assert L.gemm_backend() == rule, vendor
    monkeypatch.setattr(L, "_cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", " MKL ")
    L.gemm_backend.cache_clear()
    assert L.gemm_backend() == "mkl"
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", "openblas")
    L.gemm_backend.cache_clear()
    with pytest.raises(ValueError, match="AUDIOTOK_CPU_GEMM must be onednn or mkl"):
        L.gemm_backend()
    monkeypatch.undo()
    L.gemm_backend.cache_clear()


def test_onednn_rule_calls_onednn_from_8_rows(monkeypatch):
    """Under the oneDNN rule: 1 row and from ONEDNN_ROWS rows on (any number) oneDNN's linear,
    2..7 rows W @ x^T; onednn_product answers for any rows, float32, without autograd, and
    None otherwise."""
    _use(monkeypatch, "onednn")
    calls = []
    real = L._onednn_linear
    monkeypatch.setattr(L, "_onednn_linear", lambda *a: calls.append(a[0].shape) or real(*a))
    w, b = torch.randn(40, 48), torch.randn(40)
    for rows in (1, 2, 7, 8, 64, 65, 1000):
        calls.clear()
        x = torch.randn(rows, 48)
        _close(L.linear(x, w, b), F.linear(x, w, b))
        assert bool(calls) == (rows == 1 or rows >= L.ONEDNN_ROWS), rows
    x = torch.randn(8, 48)
    for rows in (1, 2, 8):
        _close(L.onednn_product(x[:rows], w, b), F.linear(x[:rows], w, b))
    assert L.onednn_product(x[:0], w) is None
    assert L.onednn_product(x.double(), w.double()) is None
    with torch.enable_grad():
        assert L.onednn_product(x, w.clone().requires_grad_()) is None
    _use(monkeypatch, "mkl")
    assert L.onednn_product(x, w) is None


def test_packed_weights_in_a_streaming_step(monkeypatch):
    """Inside packed_weights(), under the oneDNN rule, 2..FEW_ROWS rows of a parameter's
    product run on its packed copy (made once, kept while the weight is unchanged): from
    ONEDNN_ROWS rows on the dense oneDNN linear's bits, below within rounding. One row, more
    rows, a temporary weight, the MKL rule and outside the context: no copy."""
    if not L._ONEDNN["packed"]:
        pytest.skip("this torch has no oneDNN weight packing")
    _use(monkeypatch, "onednn")
    packed = _spy_packing(monkeypatch)
    layer = L.Linear(48, 40)
    with torch.no_grad():
        for rows in (1, 2, 7, 8, 64, 65):
            x = torch.randn(rows, 48)
            dense = L.linear(x, layer.weight, layer.bias)
            with L.packed_weights():
                got = layer(x)
            if L.ONEDNN_ROWS <= rows <= L.FEW_ROWS:
                assert torch.equal(got, dense), rows
            _close(got, F.linear(x, layer.weight, layer.bias))
        assert packed == [(40, 48)]  # packed once, for 2 rows, and kept
        layer.weight.mul_(2)  # a changed weight is packed again
        with L.packed_weights():
            x = torch.randn(4, 48)
            _close(layer(x), F.linear(x, layer.weight, layer.bias))
            temporary = layer.weight * 1
            _close(L.linear(x, temporary), F.linear(x, temporary))
        assert len(packed) == 2
        _close(layer(x), F.linear(x, layer.weight, layer.bias))  # outside: the dense forms
        _use(monkeypatch, "mkl")
        with L.packed_weights():
            _close(layer(x), F.linear(x, layer.weight, layer.bias))
        assert len(packed) == 2
    L.gemm_backend.cache_clear()


def test_streaming_convolutions_pack_their_weights(monkeypatch):
    """A causal convolution's streaming step packs its (taps-reshaped) weight once and keeps
    giving the offline samples."""
    from audiotok.nn.conv import CausalConv1d
    from audiotok.nn.streaming import streaming

    if not L._ONEDNN["packed"]:
        pytest.skip("this torch has no oneDNN weight packing")
    _use(monkeypatch, "onednn")
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
    L.gemm_backend.cache_clear()


def test_offline_pieces_do_not_pack(monkeypatch, s2_codec):
    """A long offline decode and encode run the causal codec's stream in pieces, the last one
    short: inside packed_weights(False) no step packs, and the results are the one-pass ones;
    the same tokens pushed through a library stream do pack."""
    if not L._ONEDNN["packed"]:
        pytest.skip("this torch has no oneDNN weight packing")
    _use(monkeypatch, "onednn")
    packed = _spy_packing(monkeypatch)
    with L.packed_weights(False), L.packed_weights():
        x = torch.randn(3, 48)
        layer = L.Linear(48, 40)
        _close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert packed == []
    torch.manual_seed(0)
    chunk = s2_codec.decode_chunk_frames
    tokens = torch.stack([torch.randint(0, n, (chunk + 3,)) for n in s2_codec.codebook_sizes])
    audio = s2_codec.decode(tokens[None])
    codes = s2_codec.encode(audio[0], s2_codec.sample_rate)
    assert packed == []
    with s2_codec.stream_decoder() as dec:
        streamed = torch.cat([dec.push(tokens[None, :, i : i + 1]) for i in range(chunk + 3)], -1)
    assert packed  # a stream's few-row products
    _close(streamed, audio[..., : streamed.shape[-1]])
    assert codes.tokens.shape[-1] == chunk + 3
    L.gemm_backend.cache_clear()


def _spy_packing(monkeypatch) -> list:
    """The shapes of the weights nn/linear.py packs from now on (the copies other tests made
    dropped first, so that a packing step calls _pack again)."""
    from audiotok.nn import derived

    for slot in [k for k in derived._CACHE if k[1] == "onednn packed"]:
        derived._CACHE.pop(slot, None)
    packed, real = [], L._pack
    monkeypatch.setattr(L, "_pack", lambda w: packed.append(tuple(w.shape)) or real(w))
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
    got = short_conv1d(x, w, b, dilation, stride)
    # in float32: oneDNN's strided bfloat16 kernel is wrong on AMX CPUs (see CausalConv1d._conv)
    ref = F.conv1d(x.float(), w.float(), None if b is None else b.float(), stride,
                   dilation=dilation).to(dtype)
    assert got.shape == ref.shape
    tol = 1e-5 if dtype == torch.float32 else 0.1
    torch.testing.assert_close(got.float(), ref.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("form", ["mkl", "onednn"])
def test_short_conv1d_runs_up_to_256_float32_rows_as_one_product(monkeypatch, form):
    """17..256 output rows in float32 never reach a convolution kernel: under the MKL rule
    they run as W @ taps (not linear), under the oneDNN rule through linear; 257 do."""
    from audiotok.nn import conv

    _use(monkeypatch, form)
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
        torch.testing.assert_close(short_conv1d(x, w, b), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="another form called"):
        short_conv1d(torch.randn(1, 16, 259), w, b)
    L.gemm_backend.cache_clear()
