import math

import pytest
import torch
import torch.nn.functional as F

from audiotok.nn.alias_free import AntiAliasedActivation, replicate_pad
from audiotok.nn.conv import CausalConv1d, CausalConvTranspose1d
from audiotok.nn.streaming import Ragged, streaming
from audiotok.nn.transformer import (
    KVRing,
    TransformerConfig,
    WindowedTransformer,
    apply_rope,
    rope_table,
    windowed_attention,
)


def dense_reference(q, k, v, window):
    t = q.shape[2]
    i = torch.arange(t)
    mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("t", [1, 7, 8, 9, 29])
def test_blocked_attention_equals_dense_mask(t):
    torch.manual_seed(t)
    q, k, v = (torch.randn(2, 3, t, 16) for _ in range(3))
    pos = torch.arange(t)
    out = windowed_attention(q, k, v, pos, pos, window=8)
    assert torch.allclose(out, dense_reference(q, k, v, 8), atol=1e-6)


def test_attention_with_cached_prefix_keys():
    torch.manual_seed(0)
    t, window, cached = 20, 6, 5
    q, k, v = (torch.randn(1, 2, t, 8) for _ in range(3))
    full = dense_reference(q, k, v, window)
    pos = torch.arange(t)
    part = windowed_attention(q[:, :, cached:], k, v, pos[cached:], pos, window)
    assert torch.allclose(part, full[:, :, cached:], atol=1e-6)


def test_rope_table_is_bf16_rounded_polar():
    pos = torch.arange(1000)
    table = rope_table(pos, 64, 10000.0)
    assert table.shape == (1000, 32, 2) and table.dtype == torch.bfloat16
    freqs = 1.0 / (10000.0 ** (torch.arange(0, 64, 2).float() / 64))
    angles = pos.float()[:, None] * freqs
    exact = torch.stack([angles.cos(), angles.sin()], -1)
    err = (table.float() - exact).abs()
    assert 1e-4 < err.max() <= 2e-3  # rounded to bf16, as the model was trained
    same = (table == exact.to(torch.bfloat16)).float().mean()
    assert same > 0.999  # bf16 of the float32 cos/sin (an ulp of float32 may flip a rounding)


def test_rope_rotates_adjacent_pairs():
    x = torch.zeros(1, 1, 1, 4)
    x[..., 0] = 1.0  # pair (0, 1) holds (1, 0)
    table = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])  # pair 0 rotated by 90 degrees
    out = apply_rope(x, table)
    assert out.flatten().tolist() == [0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("kernel, stride, dilation", [(7, 1, 1), (7, 1, 9), (4, 2, 1), (16, 8, 1)])
def test_causal_conv_length_and_causality(kernel, stride, dilation):
    torch.manual_seed(0)
    conv = CausalConv1d(3, 5, kernel, stride=stride, dilation=dilation)
    x = torch.randn(1, 3, 50)
    y = conv(x)
    assert y.shape[-1] == math.ceil(50 / stride)
    prefix = conv(x[..., :24])  # a prefix of whole strides gives a prefix of the output
    assert torch.allclose(y[..., : prefix.shape[-1]], prefix, atol=1e-6)


@pytest.mark.parametrize("kernel, stride", [(16, 8), (2, 2)])
def test_causal_transposed_conv_length_and_causality(kernel, stride):
    torch.manual_seed(0)
    conv = CausalConvTranspose1d(4, 3, kernel, stride=stride)
    x = torch.randn(1, 4, 10)
    y = conv(x)
    assert y.shape[-1] == 10 * stride
    assert torch.allclose(y[..., : 6 * stride], conv(x[..., :6]), atol=1e-6)


def test_transformer_is_causal_over_several_windows():
    torch.manual_seed(0)
    cfg = TransformerConfig(dim=32, n_layer=2, n_head=2, head_dim=16, intermediate_size=48,
                            window=4)
    model = WindowedTransformer(cfg).eval()
    x = torch.randn(1, 32, 19)
    with torch.no_grad():
        full, prefix = model(x), model(x[..., :11])
    assert torch.allclose(full[..., :11], prefix, atol=1e-5)


def test_kv_ring_streams_ragged_rows_exactly_and_a_repeated_step_is_the_same():
    """Pushes written into the ring in place (t <= slack) and through the functional path
    (longer), rows with different valid frames (their padding written ahead into the ring):
    each row equals its offline pass; a step run again on the state from before it (a retried
    batch) gives the same output and state."""
    torch.manual_seed(1)
    cfg = TransformerConfig(dim=32, n_layer=2, n_head=4, head_dim=8, intermediate_size=48,
                            window=40, n_local_heads=2, norm="layer", mlp="gelu")
    model = WindowedTransformer(cfg).eval()
    slack = KVRing.size_for(cfg.window) - (cfg.window - 1)
    sizes = [1, 2, slack, 3 * cfg.window, slack, slack + 1, 5, 1, 1, slack, 7, 90, 2, slack]
    rng = torch.Generator().manual_seed(2)
    valid = [[int(torch.randint(0, t + 1, (1,), generator=rng)) if t > 1 and row else t
              for row in range(3)] for t in sizes]  # row 0 always full
    x = torch.randn(3, 32, sum(sizes))
    got: list[list[torch.Tensor]] = [[], [], []]
    done = [0, 0, 0]
    with torch.no_grad(), streaming(model):
        for i, (t, frames) in enumerate(zip(sizes, valid, strict=True)):
            piece = torch.stack([x[r, :, done[r] : done[r] + t] for r in range(3)])
            piece = torch.nn.functional.pad(piece, (0, t - piece.shape[-1]))
            state = model.current_state(3, x.device)
            before = state.rebuilt(state.tensors())  # (the same tensors, in new containers)
            model.ragged = Ragged(torch.tensor(frames), t)
            y = model(piece)
            if i % 3 == 1:  # run the step again from the state before it
                after = model.state
                model.state = before
                assert torch.equal(model(piece), y)
                for (name, a), (_, b) in zip(model.state.named_tensors(),
                                             after.named_tensors(), strict=True):
                    assert torch.equal(a, b), name
            for r in range(3):
                got[r].append(y[r, :, : frames[r]])
                done[r] += frames[r]
        for r in range(3):
            whole = torch.cat(got[r], -1)
            assert whole.shape[-1] == done[r]
            model.streaming = False
            offline = model(x[r : r + 1, :, : done[r]])[0]
            model.streaming = True
            torch.testing.assert_close(whole, offline, atol=2e-5, rtol=0)


@pytest.mark.parametrize("kernel,stride", [(4, 2), (6, 2), (3, 3), (2, 2)])
def test_depthwise_transposed_push_as_multiply_adds(kernel, stride, monkeypatch):
    """A depthwise transposed convolution's few-row pushes (multiply-adds over the taps) give
    the offline samples, channels-last input or not, one frame or several per push; above
    depthwise_rows the grouped convolution runs, within rounding of the same."""
    from audiotok.nn.kernels import convs as C
    from audiotok.nn.kernels.ruleset import use_rules

    torch.manual_seed(0)
    up = CausalConvTranspose1d(6, 6, kernel, stride=stride, groups=6, bias=False)
    x = torch.randn(2, 6, 10)
    taps = []
    real = C._depthwise_taps
    monkeypatch.setattr(C, "_depthwise_taps", lambda *a: taps.append(1) or real(*a))
    with torch.no_grad():
        want = up(x)
        for cl in (False, True):
            xs = x.transpose(1, 2).contiguous().transpose(1, 2) if cl else x
            with streaming(up):
                got = torch.cat([up(xs[..., i : i + n]) for i, n in ((0, 1), (1, 3), (4, 6))], -1)
            torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
        assert len(taps) == 6
        with use_rules(depthwise_rows=0), streaming(up):
            torch.testing.assert_close(torch.cat([up(x[..., :4]), up(x[..., 4:])], -1), want,
                                       atol=1e-6, rtol=0)
        assert len(taps) == 6


@pytest.mark.parametrize("length", [1, 5, 333])
def test_polyphase_upsampling_equals_transposed_conv(length):
    """Reduced precision upsamples per phase; in float64 both ways agree to rounding."""
    aa = AntiAliasedActivation(torch.nn.Identity()).double()
    aa.filter = aa.filter.double()
    x = torch.randn(2, 3, length, dtype=torch.float64)
    y = F.pad(x, (aa.up_pad, aa.up_pad), mode="replicate")
    ref = aa.ratio * F.conv_transpose1d(y, aa.filter.expand(3, -1, -1), stride=2, groups=3)
    ref = ref[..., aa.up_crop_left : ref.shape[-1] - aa.up_crop_right]
    got = aa._upsample_polyphase(y, length)
    assert got.shape == (2, 3, 2 * length)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    act = AntiAliasedActivation(torch.nn.Tanh())
    xf = torch.randn(2, 3, length)
    torch.testing.assert_close(act(xf.bfloat16()).float(), act(xf), rtol=0, atol=0.03)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_replicate_pad_equals_torch(dtype):
    x = torch.randn(2, 3, 7).to(dtype)
    for left, right in [(5, 5), (5, 6), (0, 3), (1, 0)]:
        assert torch.equal(replicate_pad(x, left, right), F.pad(x, (left, right), mode="replicate"))


@pytest.mark.parametrize("cin, cout, kernel, stride", [(16, 32, 8, 4), (32, 64, 16, 8),
                                                       (16, 32, 4, 2)])
def test_strided_conv_in_bfloat16_is_right(cin, cout, kernel, stride):
    """bfloat16 strided convolutions within bfloat16's error of float32, streaming too (oneDNN's
    kernel for 16 -> 32, kernel 8, stride 4 returned 110 % error on AMX CPUs)."""
    from audiotok.nn.streaming import streaming

    torch.manual_seed(0)
    conv = CausalConv1d(cin, cout, kernel, stride)
    x = torch.randn(2, cin, 64 * stride)
    with torch.no_grad():
        ref = conv(x)
        conv16 = conv.to(torch.bfloat16)
        y = conv16(x.bfloat16()).float()
        with streaming(conv16):
            z = torch.cat([conv16(p.bfloat16()) for p in x.split(16 * stride, -1)], -1).float()
    for out in (y, z):
        assert out.shape == ref.shape
        assert ((out - ref).norm() / ref.norm()).item() < 1e-2


def _plain_causal_conv(conv: CausalConv1d, x: torch.Tensor) -> torch.Tensor:
    """The definition: pad left, pad right to whole strides, channels-first conv1d."""
    c = conv.conv
    x = F.pad(x.contiguous(), (conv.left_pad, -x.shape[-1] % conv.stride))
    return F.conv1d(x, c.weight, c.bias, stride=c.stride, dilation=c.dilation, groups=c.groups)


@pytest.mark.parametrize("cin, cout, kernel, stride, dilation, groups", [
    (1, 6, 7, 1, 1, 1), (1, 6, 3, 1, 3, 1), (1, 4, 8, 4, 1, 1), (6, 4, 3, 1, 1, 1),
    (6, 8, 7, 1, 9, 1), (4, 8, 8, 4, 1, 1), (4, 4, 5, 5, 1, 1), (6, 6, 7, 1, 1, 6),
])
def test_channels_last_convs_equal_conv1d(cin, cout, kernel, stride, dilation, groups):
    """The float32 CPU forms (channels-last conv2d, taps @ weight for one input channel) give
    conv1d's result on either input layout, batch 1 or 3, ragged lengths; their output is
    channels-last, and streamed pieces in that layout give the same."""
    from audiotok.nn.kernels import is_channels_last
    from audiotok.nn.streaming import streaming

    torch.manual_seed(0)
    conv = CausalConv1d(cin, cout, kernel, stride=stride, dilation=dilation, groups=groups)
    for batch, length in [(1, 97), (3, 64), (3, 61), (1, 1201), (2, 1100)]:  # > 256 rows too
        x = torch.randn(batch, cin, length)
        ref = _plain_causal_conv(conv, x)
        with torch.no_grad():
            for inp in (x, x.transpose(1, 2).contiguous().transpose(1, 2)):
                y = conv(inp)
                torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
                assert is_channels_last(y)
            xl = x.transpose(1, 2).contiguous().transpose(1, 2)
            cut = (length // 2) // stride * stride
            with streaming(conv):
                z = torch.cat([conv(xl[..., :cut]), conv(xl[..., cut:])], -1)
        torch.testing.assert_close(z, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cin, cout, kernel, stride, groups", [
    (6, 4, 8, 4, 1), (4, 4, 4, 2, 4), (6, 3, 5, 5, 1)])
def test_channels_last_transposed_convs_equal_conv_transpose1d(cin, cout, kernel, stride, groups):
    from audiotok.nn.kernels import is_channels_last
    from audiotok.nn.streaming import streaming

    torch.manual_seed(0)
    conv = CausalConvTranspose1d(cin, cout, kernel, stride=stride, groups=groups)
    c = conv.conv
    for batch, length in [(1, 40), (3, 33), (2, 300)]:
        x = torch.randn(batch, cin, length)
        ref = F.conv_transpose1d(x, c.weight, c.bias, stride=stride, groups=groups)
        ref = ref[..., : length * stride]
        xl = x.transpose(1, 2).contiguous().transpose(1, 2)
        with torch.no_grad():
            for inp in (x, xl):
                y = conv(inp)
                torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
                assert is_channels_last(y)
            with streaming(conv):
                z = torch.cat([conv(xl[..., :3]), conv(xl[..., 3:])], -1)
        torch.testing.assert_close(z, ref, rtol=1e-5, atol=1e-5)


def _transposed_forms_called(monkeypatch) -> list[str]:
    """The names of nn/kernels' two streamed transposed-convolution forms, in the order they
    are called from now on (the list returned fills as they run)."""
    from audiotok.nn.kernels import convs as conv_mod

    calls = []
    for name in ("polyphase_transposed", "conv_transpose1d_padded"):
        real = getattr(conv_mod, name)
        monkeypatch.setattr(conv_mod, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name)
                            or _real(*a, **k))
    return calls


def test_streamed_transposed_conv_takes_the_transposed_kernel_on_long_pushes(monkeypatch):
    """A push of transposed_rows frames or more (a long input's piece) runs oneDNN's transposed
    kernel over context and push, shorter ones the polyphase plain convolution; both give
    the offline samples, ragged rows included."""
    from audiotok.nn.kernels.ruleset import rules

    calls = _transposed_forms_called(monkeypatch)
    torch.manual_seed(1)
    conv = CausalConvTranspose1d(8, 6, 8, stride=4)
    long = rules().transposed_rows // 2  # two rows of it: exactly the threshold
    x = torch.randn(2, 8, 5 + long)
    with torch.no_grad():
        ref = conv(x)
        calls.clear()
        with streaming(conv):
            y = torch.cat([conv(x[..., :5]), conv(x[..., 5:])], -1)
        assert calls == ["polyphase_transposed", "conv_transpose1d_padded"]
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
        # a ragged long push: the second row's stream has one valid frame fewer
        with streaming(conv):
            conv.ragged = Ragged(torch.tensor([long, long - 1]), long)
            conv(x[..., :long])
            state = conv.state.context.clone()
        with streaming(conv):
            conv(x[1:, :, : long - 1])
            torch.testing.assert_close(conv.state.context, state[1:], rtol=0, atol=0)
        calls.clear()
        with streaming(conv):
            conv(torch.randn(1, 8, long))  # one row: below the threshold
        assert calls == ["polyphase_transposed"]


def test_a_stream_steps_transposed_conv_takes_the_transposed_kernel_on_long_pushes(monkeypatch):
    """The non-causal decoders' stream step (nn/stream_steps.py ConvTranspose, kernel 2 x
    stride, padded) runs the same choice: oneDNN's transposed kernel from transposed_rows rows
    (a long piece of an offline decode in pieces), the polyphase form below; the samples are
    the offline convolution's, its padding and end included."""
    from audiotok.nn import conv as conv_mod
    from audiotok.nn.kernels.ruleset import rules
    from audiotok.nn.stream_steps import ConvTranspose

    calls = _transposed_forms_called(monkeypatch)
    torch.manual_seed(2)
    conv = conv_mod.ConvTranspose1d(8, 6, 8, stride=4, padding=2)
    long = rules().transposed_rows // 2  # two rows of it: exactly the threshold
    x = torch.randn(2, 8, 5 + long)
    with torch.no_grad():
        ref = conv(x)
        calls.clear()
        step = ConvTranspose(conv)
        y = torch.cat([step.push(x[..., :5]), step.push(x[..., 5:]), step.flush()], -1)
    assert calls[:2] == ["polyphase_transposed", "conv_transpose1d_padded"]
    assert calls[2:] == ["polyphase_transposed"]  # the end: one frame of zeros
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cin, cout, kernel, stride, padding, dilation, groups, bias", [
    (6, 6, 7, 1, 3, 1, 6, True), (6, 6, 7, 1, 9, 3, 6, True), (8, 8, 7, 1, 27, 9, 8, False),
    (6, 6, 7, 1, 8, 3, 6, True),  # padding not whole dilations: the plain channels-last form
    (6, 6, 7, 1, 0, 3, 6, True), (6, 6, 7, 1, 3, 3, 6, True),  # less than "same" padding
    (1, 5, 7, 1, 3, 1, 1, True), (4, 8, 8, 4, 2, 1, 1, True), (6, 3, 1, 1, 0, 1, 1, False),
])
def test_padded_convs_equal_conv1d(cin, cout, kernel, stride, padding, dilation, groups, bias):
    """Non-causal (zero-padded) convolutions on channels-last data, the dilated depthwise ones
    over the dilation's phases: conv1d's result from either layout, lengths that are and are
    not whole dilations, and channels-first under export."""
    from audiotok.nn.conv import Conv1d
    from audiotok.nn.kernels import is_channels_last
    from audiotok.nn.tracing import graph_export

    torch.manual_seed(0)
    conv = Conv1d(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation,
                  groups=groups, bias=bias)
    for batch, length in [(1, 97), (3, 64), (2, 1001), (1, 5)]:
        if length + 2 * padding <= (kernel - 1) * dilation:
            continue  # no output
        x = torch.randn(batch, cin, length)
        ref = F.conv1d(x, conv.weight, conv.bias, stride, padding, dilation, groups)
        with torch.no_grad():
            for inp in (x, x.transpose(1, 2).contiguous().transpose(1, 2)):
                y = conv(inp)
                torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
                assert is_channels_last(y) or cout == 1
            with graph_export():
                assert torch.equal(conv(x), ref)


@pytest.mark.parametrize("cin, cout, stride", [(8, 4, 8), (6, 3, 3), (4, 4, 2)])
def test_padded_transposed_convs_equal_conv_transpose1d(cin, cout, stride):
    from audiotok.nn.conv import ConvTranspose1d
    from audiotok.nn.kernels import is_channels_last

    torch.manual_seed(0)
    conv = ConvTranspose1d(cin, cout, 2 * stride, stride=stride, padding=math.ceil(stride / 2),
                           output_padding=stride % 2)
    for batch, length in [(1, 40), (3, 33)]:
        x = torch.randn(batch, cin, length)
        ref = F.conv_transpose1d(x, conv.weight, conv.bias, stride, math.ceil(stride / 2),
                                 stride % 2)
        with torch.no_grad():
            y = conv(x.transpose(1, 2).contiguous().transpose(1, 2))
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
        assert is_channels_last(y)
