"""nn/kernels/attention.py: the chunked oneDNN form of full attention gives the fused kernel's
result, with and without a key mask, across query chunks; elsewhere the kernel itself runs."""

import pytest
import torch
import torch.nn.functional as F

from audiotok.nn.kernels import attention as A
from audiotok.nn.kernels.ruleset import rules, use_rules


@pytest.fixture
def onednn():
    with use_rules(products="onednn"):
        yield


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
    short = [torch.randn(1, 2, rules().long_keys - 1, 8) for _ in range(3)]
    long = [torch.randn(1, 2, rules().long_keys, 8, requires_grad=True) for _ in range(3)]
    calls = []
    kernel = F.scaled_dot_product_attention
    monkeypatch.setattr(A.F, "scaled_dot_product_attention",
                        lambda *a, **kw: calls.append(1) or kernel(*a, **kw))
    A.full_attention(*short)
    A.full_attention(*long).sum().backward()  # and gradients flow
    assert long[0].grad is not None
    with use_rules(products="mkl"):
        A.full_attention(*(x.detach() for x in long))
    assert len(calls) == 3


def test_a_streaming_steps_attention_as_two_products(onednn, monkeypatch):
    """A streaming transformer's in-place ring step with 2 query rows or more runs
    few_query_attention (the SDPA kernel's result within 1e-6); one row, and the MKL rule, run
    the kernel. Streams of both forms equal the offline pass."""
    from audiotok.nn.streaming import streaming
    from audiotok.nn.transformer import TransformerConfig, WindowedTransformer

    torch.manual_seed(2)
    q, k, v = torch.randn(3, 4, 2, 16), torch.randn(3, 4, 9, 16), torch.randn(3, 4, 9, 16)
    mask = torch.rand(3, 1, 2, 9) > 0.3
    mask[..., 0] = True  # every query sees a key
    bias = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))
    torch.testing.assert_close(A.few_query_attention(q, k, v, bias),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               rtol=1e-6, atol=1e-6)  # (the same sums in another order)
    model = WindowedTransformer(TransformerConfig(dim=32, n_layer=2, n_head=4, head_dim=8,
                                                  intermediate_size=64, window=6,
                                                  norm="layer", mlp="gelu"))
    calls = []
    real = A.few_query_attention
    monkeypatch.setattr("audiotok.nn.transformer.few_query_attention",
                        lambda *a: calls.append(a[0].shape[0] * a[0].shape[2]) or real(*a))
    x = torch.randn(2, 32, 20)
    with torch.no_grad():
        want = model(x)
        for rule in ("onednn", "mkl"):
            for batch in (1, 2):
                calls.clear()
                with use_rules(products=rule), streaming(model):
                    got = torch.cat([model(x[:batch, :, i : i + 1]) for i in range(20)], -1)
                torch.testing.assert_close(got, want[:batch], rtol=0, atol=1e-5)
                assert calls == ([batch] * 40 if rule == "onednn" and batch == 2 else []), \
                    (rule, batch)
