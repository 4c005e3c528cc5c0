"""Causal convolutions: every output sample depends only on current and past input samples.

Both stream exactly (see streaming.py): a conv keeps its last `left_pad` input samples, a
transposed conv its last input frames, so pieces give the output of the whole signal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .derived import derived
from .linear import gemm_backend, linear, packed_weights
from .streaming import StreamingModule, keep_last, ragged_of
from .tracing import exporting


class CausalConv1d(StreamingModule):
    """Conv1d with all padding on the left, so that output length = ceil(input length / stride).

    Left pad = effective kernel - stride; the right is padded up to a multiple of the stride.
    pad_mode "constant" pads with zeros; "replicate" with the first input sample on the left (in
    a stream: the stream's first sample) and the last on the right. The wrapped `conv` holds the
    (weight-norm folded) `weight` and `bias`.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        pad_mode: str = "constant",
    ):
        super().__init__()
        if pad_mode not in ("constant", "replicate"):
            raise ValueError(f"pad_mode must be 'constant' or 'replicate', got {pad_mode!r}")
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, dilation=dilation,
            groups=groups, bias=bias,
        )
        self.stride = stride
        self.left_pad = (kernel_size - 1) * dilation + 1 - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stream is not None:
            with packed_weights():  # a streaming step's few-row products (linear.py)
                return self._forward_streaming(x)
        length = x.shape[-1]
        # output frames as a ceil division, not via -length % stride: a simpler expression
        # for torch.export's symbolic lengths
        frames = (length + self.stride - 1) // self.stride
        right_pad = frames * self.stride - length
        if channels_last_fits(x, self.conv.weight) and self.pad_mode == "constant" and \
                right_pad <= self.left_pad:
            # symmetric padding inside the conv (no padded copy); the extra outputs it makes
            # at the end are dropped
            c = self.conv
            y = conv2d_nwc(x, c.weight, c.bias, self.stride, self.left_pad, c.dilation[0],
                           c.groups)
            return y[..., :frames]
        x = F.pad(x, (self.left_pad, right_pad), mode=self.pad_mode)
        return self._conv(x)

    def _conv(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        return conv1d(x, c.weight, c.bias, self.stride, c.dilation[0], c.groups)

    def initial_state(self, batch: int, device: torch.device) -> dict:
        w = self.conv.weight
        state = {"context": torch.zeros(batch, w.shape[1] * self.conv.groups, self.left_pad,
                                        device=device, dtype=w.dtype)}
        if self.pad_mode == "replicate":  # 1 once a row's stream has had its first sample
            state["started"] = torch.zeros(batch, 1, 1, device=device, dtype=w.dtype)
        return state

    def _forward_streaming(self, x: torch.Tensor) -> torch.Tensor:
        # An input that is not a multiple of the stride ends the stream: it is padded on the
        # right as an offline pass pads the whole signal (the state after it is not used).
        # (a ceil division, as forward's: torch.export states it for a symbolic length, and a
        # traced pad that may be zero stays in the graph)
        n = x.shape[-1]
        tail = (n + self.stride - 1) // self.stride * self.stride - n
        if self.left_pad > 0:
            state = self._state(x.shape[0], x.device)
            ragged = ragged_of(state)
            valid = None if ragged is None else ragged.valid(x.shape[-1])
            context = state["context"]
            if self.pad_mode == "replicate":
                started = state["started"]
                first = x[..., :1].expand(-1, -1, self.left_pad).to(context.dtype)
                context = torch.where(started > 0, context, first)
                now = torch.ones_like(started) if valid is None else \
                    (valid > 0).to(started.dtype).view(-1, 1, 1)
                state["started"] = torch.maximum(started, now)
            x = cat_time(context, x)
            state["context"] = keep_last(x, self.left_pad,
                                         None if valid is None else valid + self.left_pad)
        if not statically_known_true(tail == 0):
            x = F.pad(x, (0, tail), mode=self.pad_mode)
        c = self.conv
        if c.groups == 1:
            return short_conv1d(x, c.weight, c.bias, c.dilation[0], self.stride)
        return self._conv(x)


# batch x new frames from which a streamed float32 CPU transposed convolution runs as one
# (oneDNN's, channels-last) over context and piece, not as polyphase_transposed's plain one:
# on a 24 kHz decoder's shapes from 480 rows on (a long input's piece) it took 0.49-0.94x the
# time in 26 of 28 cases (1.13x and 1.51x in two), up to 19x longer on a push's few rows
# (benchmarks/streamed_transposed.py). The non-causal decoders' stream steps (stream_steps.py)
# take the same rule: a 24 kHz decode of 10 s in 2 s pieces took 157 against 163 ms, of 60 s 907
# against 939 ms (the audio within 8e-8)
TRANSPOSED_ROWS = 512


class CausalConvTranspose1d(StreamingModule):
    """ConvTranspose1d without its last `kernel - stride` output samples: output = L * stride."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 groups: int = 1, bias: bool = True):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride,
                                       groups=groups, bias=bias)
        self.stride = stride
        self.trim = kernel_size - stride
        self.context_frames = -(-kernel_size // stride) - 1  # earlier frames reaching a new one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stream is not None:
            with packed_weights():  # a streaming step's few-row products (linear.py)
                return self._forward_streaming(x)
        c = self.conv
        y = conv_transpose1d_padded(x, c.weight, c.bias, self.stride, groups=c.groups)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y

    def initial_state(self, batch: int, device: torch.device) -> dict:
        w = self.conv.weight
        return {"context": torch.zeros(batch, w.shape[0], self.context_frames, device=device,
                                       dtype=w.dtype)}

    def _forward_streaming(self, x: torch.Tensor) -> torch.Tensor:
        c, n = self.context_frames, x.shape[-1]
        if c == 0:
            return transposed_new_samples(x, self.conv, 0)
        state = self._state(x.shape[0], x.device)
        ragged = ragged_of(state)
        end = None if ragged is None else ragged.valid(n) + c
        x = cat_time(state["context"], x)
        state["context"] = keep_last(x, c, end)
        return transposed_new_samples(x, self.conv, c)


def transposed_new_samples(x: torch.Tensor, conv: nn.ConvTranspose1d, context: int
                           ) -> torch.Tensor:
    """The samples of `conv` (a transposed convolution, its padding not applied) over x =
    `context` frames + n new ones that the new frames start: n x stride samples from the first
    new frame's. From TRANSPOSED_ROWS rows (batch x new frames) on, on channels-last data,
    oneDNN's transposed convolution over the whole, cut; else polyphase_transposed."""
    rows = x.shape[0] * (x.shape[-1] - context)
    if rows >= TRANSPOSED_ROWS and conv.groups == 1 and channels_last_fits(x, conv.weight):
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
    elif groups == out == x.shape[1] and b * steps <= DEPTHWISE_ROWS and not exporting():
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


# batch x new frames up to which a depthwise transposed convolution's polyphase form runs as
# multiply-adds over its taps (a 1-frame push of a 512-channel upsampler: oneDNN's depthwise
# kernel took 0.10 ms a call)
DEPTHWISE_ROWS = 16


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


class Conv1d(nn.Conv1d):
    """nn.Conv1d (zero padding, the same parameters and names) on channels-last data where that
    is fast: conv1d_padded."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv1d_padded(x, self.weight, self.bias, self.stride[0], self.padding[0],
                             self.dilation[0], self.groups)


class ConvTranspose1d(nn.ConvTranspose1d):
    """nn.ConvTranspose1d (the same parameters and names) on channels-last data where that is
    fast: conv_transpose1d_padded."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_transpose1d_padded(x, self.weight, self.bias, self.stride[0],
                                       self.padding[0], self.output_padding[0], self.groups)


def conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           stride: int = 1, dilation: int = 1, groups: int = 1) -> torch.Tensor:
    """F.conv1d (no padding) in the form that is fast and right here: channels-last in float32
    on the CPU; a strided bfloat16 one as a stride-1 convolution over the input's polyphase
    components (oneDNN 3.12's bfloat16 kernel for some strided shapes, e.g. 16 -> 32 channels,
    kernel 8, stride 4, returns wrong values on CPUs with AMX: 110 % error)."""
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
    """Whether a convolution runs on channels-last data: float32 on the CPU, outside export.
    On the long, narrow activations near the audio rate oneDNN's channels-last (NWC) kernels
    take 0.26-0.63x the time of conv1d's channels-first ones; on the short, wide ones near the
    frame rate 1.1-1.35x (benchmarks/long_convs.py, a codec's shapes), a loss that is small next
    to the gain. Their output is channels-last too ([B, C, T] with channel stride 1), so a chain
    of convolutions and pointwise layers stays in that layout without copies."""
    return x.device.type == "cpu" and x.dtype == torch.float32 and \
        weight.dtype == torch.float32 and not exporting()


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
                  stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1
                  ) -> torch.Tensor:
    """F.conv1d with `padding` zeros on both sides (a non-causal convolution), on channels-last
    data where that is fast (channels_last_fits). A dilated depthwise convolution runs as an
    undilated one over the dilation's interleaved phases (oneDNN's channels-last kernel for
    dilated depthwise convolutions is 2-3x slower than its channels-first one; the phase form
    is 2-3x faster, with the same sums in the same order)."""
    if not channels_last_fits(x, weight):
        return F.conv1d(x, weight, bias, stride, padding, dilation, groups)
    c = x.shape[1]
    if dilation > 1 and groups == c == weight.shape[0] and stride == 1 and \
            padding % dilation == 0:
        return _dilated_depthwise_nwc(x, weight, bias, padding, dilation)
    return conv2d_nwc(x, weight, bias, stride, padding, dilation, groups)


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
    """F.conv_transpose1d, on channels-last data where that is fast (0.4-0.55x the time on a
    codec decoder's upsampling shapes, the same sums)."""
    if not channels_last_fits(x, weight):
        return F.conv_transpose1d(x, weight, bias, stride, padding, output_padding, groups)
    return F.conv_transpose2d(channels_last(x), channels_last(weight), bias, stride=(1, stride),
                              padding=(0, padding), output_padding=(0, output_padding),
                              groups=groups).squeeze(2)


# batch x output steps up to which short_conv1d uses one matrix product (float32: WIDE_CONV_STEPS)
SHORT_CONV_STEPS = 64
# float32: from this many output rows on (and up to WIDE_CONV_STEPS) the product runs as
# W @ taps with the taps stored row-major, [in * tap, rows] (for one row of the batch, a view of
# the stacked taps, and the result is already [out, steps]): at the push shapes with 17-256 rows
# it takes 0.71-1.02x the time of the better of conv1d and the few-row form, and 0.33-1.02x
# that of conv1d (`benchmarks/short_convs.py`). Below 17 rows W @ taps^T reads the weight
# faster (1.8-1.9x at 4 rows); beyond 256, conv1d's kernels win on kernel-7 convolutions.
TAPS_ROWS = 17
WIDE_CONV_STEPS = 256


def short_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 dilation: int = 1, stride: int = 1) -> torch.Tensor:
    """conv1d without padding. On few output steps (a streaming push at the low rates) it runs
    as one matrix product over the stacked taps: there conv1d takes 3-4x longer (slow kernels
    for short inputs; strided ones 2 ms for 3 steps of 512 -> 1024 channels), while the
    product only streams the weight, in place, once. Up to 16 rows the taps are the product's
    rows (linear's few-row forms), from 17 rows in float32 its columns. Other inputs go to
    conv1d() above."""
    b, cin, length = x.shape
    cout, _, k = weight.shape
    steps = (length - (k - 1) * dilation - 1) // stride + 1
    rows = b * steps
    f32 = x.dtype == torch.float32 and weight.dtype == torch.float32
    limit = WIDE_CONV_STEPS if f32 else SHORT_CONV_STEPS
    if exporting() or x.device.type != "cpu" or rows > limit:
        return conv1d(x, weight, bias, stride, dilation)
    span = (steps - 1) * stride + 1
    taps = torch.stack([x[..., j * dilation : j * dilation + span : stride] for j in range(k)], 2)
    w = weight.reshape(cout, cin * k)
    if f32 and rows >= TAPS_ROWS and gemm_backend() != "onednn":
        # taps [b, in, tap, step] -> [(in, tap), (row, step)], row-major
        y = w @ (taps.view(cin * k, steps) if b == 1
                 else taps.permute(1, 2, 0, 3).reshape(cin * k, rows))
        if bias is not None:
            y += bias[:, None]
        return y[None] if b == 1 else y.view(cout, b, steps).transpose(0, 1)
    taps = taps.permute(0, 3, 1, 2).reshape(rows, cin * k)  # (row, step) x (in, tap)
    y = linear(taps, w, bias, source=weight)  # see linear.py for the fast forms
    return y.view(b, steps, cout).transpose(1, 2)


def _polyphase_weight(weight: torch.Tensor, stride: int, context: int, groups: int = 1
                      ) -> torch.Tensor:
    """ConvTranspose1d weight [in, out / groups, K] as Conv1d weight [out * stride, in / groups,
    context + 1] (same groups): output phase p of a frame, tap j (input frame t - context + j),
    is weight[:, :, p + (context - j) * stride] (zero past K). Cached per weight tensor (shared
    by stream copies; nn/derived.py)."""
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
