"""Reduced precision with float32 islands: most of a model runs in bfloat16/float16, while the
steps whose rounding matters (first and last convolutions touching audio, vector quantisation,
FSQ, the iSTFT head; norms and softmax compute in float32 internally) keep float32 weights.
Each island casts its input; the code after it casts back where it needs to."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import AudiotokError
from .conv import Conv1d, ConvTranspose1d
from .kernels.cpu import reduced_conv_kernels

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_dtype(name: str) -> torch.dtype:
    """torch.float32 / bfloat16 / float16 from its name."""
    if name not in DTYPES:
        raise AudiotokError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return DTYPES[name]


def param_dtype(module: nn.Module) -> torch.dtype:
    """The dtype of a module's first floating parameter (float32 if it has none)."""
    for p in module.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def run_in(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """module(x) with x cast to the module's parameter dtype (as it is, for a module without
    floating parameters: an activation)."""
    p = next((p for p in module.parameters() if p.is_floating_point()), None)
    return module(x if p is None else x.to(p.dtype))


def set_precision(model: nn.Module, dtype: torch.dtype, islands: list[nn.Module]) -> nn.Module:
    """Cast `model` to `dtype` but for its `islands`, which keep their float32 values (they
    are never rounded to `dtype` on the way). In reduced precision on a
    CPU whose oneDNN has no convolution kernels for it, torch's own zero-padded Conv1d and
    (undilated) ConvTranspose1d modules in that dtype become audiotok's (nn/conv.py: the same
    parameters), whose kernels run such convolutions in float32 and round
    (nn/kernels/convs.py, in_float32)."""
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating type, got {dtype}")
    keep = {id(m) for island in islands for m in island.modules()}

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype) if t.is_floating_point() else t

    for m in model.modules():
        if id(m) not in keep:
            m._apply(cast, recurse=False)  # (its own tensors; an LSTM re-points its weights)
    for island in islands:
        island.float()
    if dtype != torch.float32 and not reduced_conv_kernels(dtype):
        for m in model.modules():
            if type(m) is nn.Conv1d and _plain(m, dtype):
                m.__class__ = Conv1d
            elif type(m) is nn.ConvTranspose1d and _plain(m, dtype) and m.dilation == (1,):
                m.__class__ = ConvTranspose1d
    return model


def _plain(conv: nn.Module, dtype: torch.dtype) -> bool:
    """A convolution in `dtype` with zero padding of a fixed size (what nn/conv's take)."""
    return conv.weight.dtype == dtype and conv.padding_mode == "zeros" and \
        not isinstance(conv.padding, str)
