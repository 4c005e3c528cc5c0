"""Which CPU this is, as far as kernel choices go: its maker, its vector extensions, its name."""

from __future__ import annotations

import functools
import hashlib
import platform
from dataclasses import dataclass


@dataclass(frozen=True)
class Cpu:
    vendor: str  # "GenuineIntel", "AuthenticAMD", ... ("" where /proc/cpuinfo has none)
    model: str  # the model name /proc/cpuinfo gives (virtual machines often shorten it)
    family: str  # the x86 family and model numbers, "25/1" ("" elsewhere)
    flags: frozenset[str]

    @property
    def avx512(self) -> bool:
        return "avx512f" in self.flags

    @property
    def amx(self) -> bool:
        return "amx_bf16" in self.flags

    def describe(self) -> str:
        """One line for docs and logs: "AuthenticAMD AMD EPYC (family 25/1, AVX2)"."""
        isa = "AVX-512 + AMX" if self.amx else "AVX-512" if self.avx512 else \
            "AVX2" if "avx2" in self.flags else platform.machine()
        return f"{self.vendor or platform.machine()} {self.model} (family {self.family}, {isa})"

    def key(self) -> str:
        """A short digest of what tells CPUs apart for kernel timings (a calibration's key)."""
        text = "|".join([self.vendor, self.model, self.family, *sorted(
            f for f in self.flags if f.startswith(("avx", "amx", "fma", "f16c")))])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@functools.cache
def this_cpu() -> Cpu:
    """The CPU of this machine, read once from /proc/cpuinfo (empty fields where there is
    none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                name, _, value = line.partition(":")
                fields[name.strip()] = value.strip()
    except OSError:
        pass
    family = f"{fields['cpu family']}/{fields['model']}" if "cpu family" in fields else ""
    return Cpu(fields.get("vendor_id", ""), fields.get("model name", platform.processor()),
               family, frozenset(fields.get("flags", "").split()))


@functools.cache
def reduced_conv_kernels(dtype) -> bool:
    """Whether torch's oneDNN has convolution kernels for `dtype` on this CPU (as torch decides:
    bfloat16 needs AVX-512 or AVX-NE-CONVERT). Without them torch runs its reference convolution
    for that dtype, many times float32's time (benchmarks/kernels/reduced_convs.py)."""
    import torch

    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if dtype == torch.float16:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return True
