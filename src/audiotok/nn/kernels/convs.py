"""Convolutions in the form that is fast on this CPU (ruleset.py; docs/performance.md, kernel
rules): channels-last (NWC) oneDNN kernels for float32 on the CPU, a short convolution as one
matrix product over its stacked taps, a streamed transposed convolution as a polyphase product
or oneDNN's transposed kernel, a dilated depthwise convolution over its interleaved phases.
Every form computes the same sums as F.conv1d / F.conv_transpose1d (rounding aside).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..tracing import exporting
from .cpu import reduced_conv_kernels
from .derivations import derived
from .products import linear, onednn_rule
from .ruleset import rules


def transposed_new_samples(x: torch.Tensor, conv: nn.ConvTranspose1d, context: int
                           ) -> torch.Tensor:
    """The samples of `conv` (a transposed convolution, its padding not applied) over x =
    `context` frames + n new ones that the new frames start: n x stride samples from the first
    new frame's. From the rules' transposed_rows rows (batch x new frames) on, on channels-last
    data, oneDNN's transposed convolution over the whole, cut; else polyphase_transposed."""
    rows = x.shape[0] * (x.shape[-1] - context)
    if rows >= rules().transposed_rows and conv.groups == 1 and \
            channels_last_fits(x, conv.weight):
        s = conv.stride[0]
        y = conv_transpose1d_padded(x, conv.weight, conv.bias, s)
        return y[..., context * s : x.shape[-1] * s]
    return polyphase_transposed(x, conv, context)


def polyphase_transposed(x: torch.Tensor, conv: nn.ConvTranspose1d, context: int
                         ) -> torch.Tensor:
    """The new samples of `conv` (a transposed convolution, no padding) over x = `context`
    frames + n new ones (n x stride samples, from the first new frame's), as a plain conv (kernel
    context + 1) to stride x out_channels, phases interleaved: the same sums, but oneDNN runs
    this on short inputs where conv_transpose falls to a slow kernel."""
    b, _, length = x.shape
    s, out, groups = conv.stride[0], conv.out_channels, conv.groups
    w = _polyphase_weight(conv.weight, s, context, groups)
    steps = length - context
    if groups == 1:
        y = short_conv1d(x, w)
    elif groups == out == x.shape[1] and b * steps <= rules().depthwise_rows \
            and not exporting():
        y = _depthwise_taps(x, w, s)
    else:
        y = conv1d(x, w, groups=groups)
    if is_channels_last(y):  # memory [B, T, out, s] -> [B, T, s, out], still channels-last
        y = y.transpose(1, 2).reshape(b, steps, out, s).transpose(2, 3)
        y = y.reshape(b, steps * s, out).transpose(1, 2)
    else:
        y = y.reshape(b, out, s, steps).transpose(2, 3)
        y = y.reshape(b, out, -1)
    return y if conv.bias is None else y + conv.bias[:, None]


def _depthwise_taps(x: torch.Tensor, w: torch.Tensor, stride: int) -> torch.Tensor:
    """conv1d(x, w, groups=C) for x [B, C, L] and a polyphase weight w [C * stride, 1, taps]
    (row c * stride + p reads channel c), as multiply-adds over the taps: [B, C * stride,
    L - taps + 1], channels-first."""
    taps = w.shape[-1]
    steps = x.shape[-1] - taps + 1
    xs = x.repeat_interleave(stride, 1)
    y = xs[..., :steps] * w[:, :, 0]
    for j in range(1, taps):
        y.addcmul_(xs[..., j : j + steps], w[:, :, j])
    return y


def conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           stride: int = 1, dilation: int = 1, groups: int = 1) -> torch.Tensor:
    """F.conv1d (no padding) in the form that is fast and right here: channels-last in float32
    on the CPU; a strided bfloat16 one as a stride-1 convolution over the input's polyphase
    components (oneDNN 3.12's bfloat16 kernel for some strided shapes, e.g. 16 -> 32 channels,
    kernel 8, stride 4, returns wrong values on CPUs with AMX: 110 % error)."""
    if in_float32(x, weight):
        return conv1d(x.float(), float32(weight), float32(bias), stride, dilation,
                      groups).to(x.dtype)
    if channels_last_fits(x, weight):
        return conv2d_nwc(x, weight, bias, stride, 0, dilation, groups)
    k = weight.shape[-1]
    if stride == 1 or x.dtype != torch.bfloat16 or groups != 1 or dilation != 1 or k % stride:
        return F.conv1d(x, weight, bias, stride, 0, dilation, groups)
    b, cin, n = x.shape
    n -= n % stride  # the samples no output reaches
    xp = x[..., :n].reshape(b, cin, n // stride, stride).transpose(2, 3)
    xp = xp.reshape(b, cin * stride, n // stride)
    cout = weight.shape[0]
    wp = weight.reshape(cout, cin, k // stride, stride).transpose(2, 3)
    return F.conv1d(xp, wp.reshape(cout, cin * stride, k // stride), bias)


def channels_last_fits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a convolution runs on channels-last data: float32 on the CPU, outside export
    (oneDNN's NWC kernels are the faster on a codec's long activations: benchmarks/kernels/
    long_convs.py). Their output is channels-last too ([B, C, T] with channel stride 1), so a
    chain of convolutions and pointwise layers stays in that layout without copies."""
    return x.device.type == "cpu" and x.dtype == torch.float32 and \
        weight.dtype == torch.float32 and not exporting()


def in_float32(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a bfloat16 or float16 convolution runs in float32 on exact copies of its
    operands, rounded back: on a CPU whose oneDNN has no kernels for the dtype
    (cpu.reduced_conv_kernels), where torch's reference kernel is many times slower. The same
    products, summed in float32 as the reduced kernels sum them; only the order differs."""
    # (the dtype first: a float32 call, the common one, answers after one comparison)
    return x.dtype in (torch.bfloat16, torch.float16) and weight.dtype == x.dtype and \
        x.device.type == "cpu" and not exporting() and not reduced_conv_kernels(x.dtype)


def float32(t: torch.Tensor | None) -> torch.Tensor | None:
    """A float32 copy of a weight or bias, made once (derivations.py)."""
    return None if t is None else derived(t, "float32", lambda w: w.float())


def is_channels_last(x: torch.Tensor) -> bool:
    """[B, C, T] with the channels adjacent in memory (and more than one of them)."""
    return x.shape[1] > 1 and x.stride(1) == 1


def cat_time(context: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[context, x] along time, in x's layout (torch.cat answers channels-first)."""
    if not is_channels_last(x):
        return torch.cat([context, x], dim=-1)
    b, c, n = x.shape
    out = x.new_empty(b, context.shape[-1] + n, c).transpose(1, 2)
    out[..., : context.shape[-1]] = context
    out[..., context.shape[-1]:] = x
    return out


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """[B, C, T] as a channels-last [B, C, 1, T] (a view when x is already channels-last).
    Weights go in this form too: with one input channel an input is both layouts at once, and
    the weight's layout then picks the output's."""
    return x.unsqueeze(2).contiguous(memory_format=torch.channels_last)


def conv2d_nwc(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
               stride: int = 1, pad: int = 0, dilation: int = 1, groups: int = 1
               ) -> torch.Tensor:
    """F.conv1d of [B, C, T] with `pad` zeros on both sides, on channels-last data; the result
    is channels-last."""
    if x.shape[1] == 1 and groups == 1:
        # one input channel (the audio): conv2d cannot tell the layouts apart and answers
        # channels-first; as taps @ weight^T the output is [B, T', C'] directly
        k = weight.shape[-1]
        taps = F.pad(x[:, 0], (pad, pad)).unfold(-1, (k - 1) * dilation + 1, stride)
        if dilation > 1:
            taps = taps[..., ::dilation]
        w = weight[:, 0].t()
        y = taps @ w if bias is None else torch.baddbmm(bias, taps, w.expand(x.shape[0], -1, -1))
        return y.transpose(1, 2)
    return F.conv2d(channels_last(x), channels_last(weight), bias, stride=(1, stride),
                    padding=(0, pad), dilation=(1, dilation), groups=groups).squeeze(2)


def conv1d_padded(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  stride: int = 1, padding: int | tuple[int, int] = 0, dilation: int = 1,
                  groups: int = 1, mode: str = "constant") -> torch.Tensor:
    """F.conv1d of x padded with `padding` samples on both sides, or (left, right), in `mode`
    ("constant": zeros; or F.pad's "replicate", "reflect"), on channels-last data where that is
    fast (channels_last_fits): zero padding up to the left's on both sides goes inside the
    convolution (no padded copy; the extra outputs at the end are dropped). A dilated depthwise
    convolution runs as an undilated one over the dilation's interleaved phases (oneDNN's
    channels-last kernel for dilated depthwise convolutions is slow; the same sums in the same
    order)."""
    if in_float32(x, weight):
        return conv1d_padded(x.float(), float32(weight), float32(bias), stride, padding,
                             dilation, groups, mode).to(x.dtype)
    symmetric = isinstance(padding, int)
    left, right = (padding, padding) if symmetric else padding
    if not channels_last_fits(x, weight) or mode != "constant" or right > left:
        if symmetric and mode == "constant":
            return F.conv1d(x, weight, bias, stride, left, dilation, groups)
        return conv1d(F.pad(x, (left, right), mode=mode), weight, bias, stride, dilation, groups)
    c = x.shape[1]
    if symmetric and dilation > 1 and groups == c == weight.shape[0] and stride == 1 and \
            left % dilation == 0:
        return _dilated_depthwise_nwc(x, weight, bias, left, dilation)
    y = conv2d_nwc(x, weight, bias, stride, left, dilation, groups)
    if right == left:
        return y
    steps = (x.shape[-1] + left + right - (weight.shape[-1] - 1) * dilation - 1) // stride + 1
    return y[..., :steps]


def _dilated_depthwise_nwc(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                           padding: int, dilation: int) -> torch.Tensor:
    """Depthwise conv, dilation d: sample t = q d + r of channel c is sample q of channel
    r C + c of the input viewed as [B, T / d, d C] (channels-last memory), where the kernel's
    taps are d apart in t and 1 apart in q; the weight is repeated for each phase."""
    b, c, n = x.shape
    d = dilation
    if not is_channels_last(x):
        x = channels_last(x).squeeze(2)
    rest = -n % d
    if rest:  # zeros past the end, as the convolution's own padding would read them
        x = cat_time(x, x.new_zeros(b, rest, c).transpose(1, 2))  # (channels-last zeros)
    phases = x.transpose(1, 2).reshape(b, (n + rest) // d, d * c).transpose(1, 2)
    w = derived(weight, f"phases {d}", lambda w: w.repeat(d, 1, 1))
    bw = None if bias is None else derived(bias, f"phases {d}", lambda v: v.repeat(d))
    y = conv2d_nwc(phases, w, bw, 1, padding // d, 1, d * c)  # [B, d C, steps per phase]
    out = n + 2 * padding - (weight.shape[-1] - 1) * d
    return y.transpose(1, 2).reshape(b, y.shape[-1] * d, c)[:, :out].transpose(1, 2)


def conv_transpose1d_padded(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                            stride: int, padding: int = 0, output_padding: int = 0,
                            groups: int = 1) -> torch.Tensor:
    """F.conv_transpose1d, on channels-last data where that is fast (channels_last_fits)."""
    if in_float32(x, weight):
        return conv_transpose1d_padded(x.float(), float32(weight), float32(bias), stride,
                                       padding, output_padding, groups).to(x.dtype)
    if not channels_last_fits(x, weight):
        return F.conv_transpose1d(x, weight, bias, stride, padding, output_padding, groups)
    return F.conv_transpose2d(channels_last(x), channels_last(weight), bias, stride=(1, stride),
                              padding=(0, padding), output_padding=(0, output_padding),
                              groups=groups).squeeze(2)


def short_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 dilation: int = 1, stride: int = 1) -> torch.Tensor:
    """conv1d without padding. Up to the rules' short_conv_rows output rows (short_narrow_rows
    for 1 or 2 taps; batch x steps: a streaming push at the low rates) it runs as one matrix
    product over the stacked taps, which streams the weight once where conv1d's kernels for
    short inputs are slow; the taps are the product's rows (linear's few-row forms), or under
    the MKL rule from taps_rows rows on its columns. Longer inputs go to conv1d()."""
    b, cin, length = x.shape
    cout, _, k = weight.shape
    steps = (length - (k - 1) * dilation - 1) // stride + 1
    rows = b * steps
    f32 = x.dtype == torch.float32 and weight.dtype == torch.float32
    r = rules()
    limit = (r.short_conv_rows if k > 2 else r.short_narrow_rows) if f32 else \
        r.short_conv_rows_reduced
    if exporting() or x.device.type != "cpu" or rows > limit:
        return conv1d(x, weight, bias, stride, dilation)
    columns = f32 and rows >= r.taps_rows and not onednn_rule()
    if not columns and x.stride(1) == 1 and x.stride(2) == cin:
        # channels-last: the taps as rows [(row, step), (tap, in)] in one copy of runs of
        # adjacent channels, against the weight reordered to match (made once)
        t = x.transpose(1, 2)
        taps = t.as_strided((b, steps, k, cin), (t.stride(0), stride * cin, dilation * cin, 1))
        w = derived(weight, "taps by tap", lambda w: w.permute(0, 2, 1).reshape(cout, k * cin))
        y = linear(taps.reshape(rows, k * cin), w, bias, source=w)
        return y.view(b, steps, cout).transpose(1, 2)
    span = (steps - 1) * stride + 1
    taps = torch.stack([x[..., j * dilation : j * dilation + span : stride] for j in range(k)], 2)
    w = weight.reshape(cout, cin * k)
    if columns:
        # taps [b, in, tap, step] -> [(in, tap), (row, step)], row-major
        y = w @ (taps.view(cin * k, steps) if b == 1
                 else taps.permute(1, 2, 0, 3).reshape(cin * k, rows))
        if bias is not None:
            y += bias[:, None]
        return y[None] if b == 1 else y.view(cout, b, steps).transpose(0, 1)
    taps = taps.permute(0, 3, 1, 2).reshape(rows, cin * k)  # (row, step) x (in, tap)
    y = linear(taps, w, bias, source=weight)
    return y.view(b, steps, cout).transpose(1, 2)


def _polyphase_weight(weight: torch.Tensor, stride: int, context: int, groups: int = 1
                      ) -> torch.Tensor:
    """ConvTranspose1d weight [in, out / groups, K] as Conv1d weight [out * stride, in / groups,
    context + 1] (same groups): output phase p of a frame, tap j (input frame t - context + j),
    is weight[:, :, p + (context - j) * stride] (zero past K). Made once per weight tensor
    (derivations.py)."""
    return derived(weight, f"polyphase {stride} {context} {groups}",
                   lambda w: _polyphase_of(w, stride, context, groups))


def _polyphase_of(weight: torch.Tensor, stride: int, context: int, groups: int) -> torch.Tensor:
    cin, cout_g, k = weight.shape
    taps = []
    for j in range(context + 1):
        first = (context - j) * stride
        tap = weight[:, :, first : first + stride] if first < k else weight[:, :, :0]
        taps.append(F.pad(tap, (0, stride - tap.shape[-1])))  # zero past K
    w = torch.stack(taps, -1)  # [in, out / groups, stride, taps]
    w = w.view(groups, cin // groups, cout_g, stride, context + 1).permute(0, 2, 3, 1, 4)
    return w.reshape(groups * cout_g * stride, cin // groups, context + 1).contiguous()


def reflect_pad(x: torch.Tensor, left: int, right: int) -> torch.Tensor:
    """Reflect padding, the input first zero-extended on the right when it is not longer than
    the padding (and that extension dropped again), as EnCodec's pad1d. Long inputs are padded
    with one copy in their own layout (channels-last stays so; F.pad's reflection kernel is
    slow on long signals)."""
    length = x.shape[-1]
    top = max(left, right)
    if exporting():  # one form for every length (the graph's is symbolic): extend by 0 or more
        extra = torch.sym_max(top - length + 1, 0)
        padded = F.pad(F.pad(x, (0, extra)), (left, right), mode="reflect")
        return padded[..., : left + length + right]
    if length <= top:
        extra = top - length + 1
        padded = F.pad(F.pad(x, (0, extra)), (left, right), mode="reflect")
        return padded[..., : padded.shape[-1] - extra]
    if not left and not right:
        return x
    b, c, _ = x.shape
    out = x.new_empty(b, left + length + right, c).transpose(1, 2) if is_channels_last(x) \
        else x.new_empty(b, c, left + length + right)
    out[..., left : left + length] = x
    if left:
        out[..., :left] = x[..., 1 : left + 1].flip(-1)
    if right:
        out[..., left + length :] = x[..., length - right - 1 : length - 1].flip(-1)
    return out
