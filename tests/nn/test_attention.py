"""nn/attention.py: the chunked oneDNN form of full attention gives the fused kernel's result,
with and without a key mask, across query chunks; elsewhere the kernel itself runs."""

import pytest
import torch
import torch.nn.functional as F

from audiotok.nn import attention as A
from audiotok.nn import linear as L


@pytest.fixture
def onednn(monkeypatch):
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", "onednn")
    L.gemm_backend.cache_clear()
    yield
    monkeypatch.undo()
    L.gemm_backend.cache_clear()


@pytest.mark.parametrize("batch,t,masked", [(1, 700, False), (2, 1100, True), (3, 256, True)])
def test_chunked_attention_equals_the_kernel(onednn, monkeypatch, batch, t, masked):
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, 4, t, 16) for _ in range(3))
    lengths = torch.tensor([t, t // 2 + 1, 1][:batch]) if masked else None
    mask = None if lengths is None else torch.arange(t)[None] < lengths[:, None]
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None
                                          else mask[:, None, None, :])
    monkeypatch.setattr(A.F, "scaled_dot_product_attention",
                        lambda *a, **kw: pytest.fail("the kernel ran"))
    got = A.full_attention(q, k, v, mask)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_kernel_runs_on_short_inputs_under_autograd_and_under_mkl(onednn, monkeypatch):
    torch.manual_seed(1)
    short = [torch.randn(1, 2, A.LONG_KEYS - 1, 8) for _ in range(3)]
    long = [torch.randn(1, 2, A.LONG_KEYS, 8, requires_grad=True) for _ in range(3)]
    calls = []
    kernel = F.scaled_dot_product_attention
    monkeypatch.setattr(A.F, "scaled_dot_product_attention",
                        lambda *a, **kw: calls.append(1) or kernel(*a, **kw))
    A.full_attention(*short)
    A.full_attention(*long).sum().backward()  # and gradients flow
    assert long[0].grad is not None
    monkeypatch.setenv("AUDIOTOK_CPU_GEMM", "mkl")
    L.gemm_backend.cache_clear()
    A.full_attention(*(x.detach() for x in long))
    assert len(calls) == 3
