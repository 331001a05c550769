"""Multi-head dot-product attention (``nn/attention.py``): the causal mask, ``attend`` against
:func:`highway_transformer.nn.reference.scaled_dot_attention` in float64, and the module's
causality and KV cache, one token or a chunk at a time."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn import attention, reference
from highway_transformer.nn.attention import MultiHeadAttention, attend, causal_mask
from highway_transformer.nn.decoding import KVCache


def test_the_causal_mask_lets_the_last_queries_see_every_earlier_key() -> None:
    mask = causal_mask(2, 4, torch.device("cpu"))
    assert mask.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert torch.equal(causal_mask(3, 3, torch.device("cpu")), torch.ones(3, 3).tril().bool())


def _qkv(lq: int = 3, lk: int = 5) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 2, lq, 4, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 2, lk, 4, generator=g, dtype=torch.float64) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("scale", [None, 0.3])
def test_attend_is_softmax_of_scaled_scores_times_v(scale: float | None) -> None:
    q, k, v = _qkv()
    mask = causal_mask(3, 5, torch.device("cpu"))
    got = attend(q, k, v, mask, False, 0.0, scale)
    expected = reference.scaled_dot_attention(q, k, v, ~mask, scale)  # reference: True hides
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    square = _qkv(4, 4)
    causal = attend(*square, None, True, 0.0)
    hidden = ~causal_mask(4, 4, torch.device("cpu"))
    torch.testing.assert_close(
        causal, reference.scaled_dot_attention(*square, hidden), atol=1e-12, rtol=0
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("masked", [False, True])
def test_reduced_precision_narrow_heads_attend_on_fp32_copies_on_the_cpu(
    dtype: torch.dtype, masked: bool
) -> None:
    """CPU bf16/fp16 attention with heads <= MAX_FP32_HEAD_DIM runs on fp32 copies: the
    result and every gradient in the operands' dtype, each the fp64 oracle's value (on the
    same rounded operands) rounded once, under autocast too; by a mask or the causal flag."""
    operands = [t.to(dtype) for t in _qkv(5, 5)]
    hidden = ~causal_mask(5, 5, torch.device("cpu"))
    exact_in = [t.double().requires_grad_() for t in operands]
    exact = reference.scaled_dot_attention(*exact_in, hidden)
    grad = torch.randn(exact.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    exact_grads = torch.autograd.grad(exact, exact_in, grad.double())
    q, k, v = (t.clone().requires_grad_() for t in operands)
    assert attention.runs_faster_in_fp32(q)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attend(q, k, v, ~hidden if masked else None, not masked, 0.0)
    got = torch.autograd.grad(out, (q, k, v), grad)
    assert out.dtype == dtype and all(g.dtype == dtype for g in got)
    eps = torch.finfo(dtype).eps  # one rounding of the fp32 result: within eps relative
    torch.testing.assert_close(out.double(), exact, atol=eps, rtol=eps)
    for g, e in zip(got, exact_grads, strict=True):
        torch.testing.assert_close(g.double(), e, atol=eps, rtol=eps)


def test_wide_heads_and_fp32_keep_torchs_own_kernel() -> None:
    wide = torch.zeros(1, 1, 2, attention.MAX_FP32_HEAD_DIM + 1, dtype=torch.bfloat16)
    assert not attention.runs_faster_in_fp32(wide)
    assert not attention.runs_faster_in_fp32(torch.zeros(1, 1, 2, 16))
    assert attention.runs_faster_in_fp32(torch.zeros(1, 1, 2, 16, dtype=torch.float16))


def _module(causal: bool = True) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(8, 2, d_head=3, causal=causal).eval()


def test_heads_of_their_own_width_project_back_to_d_model() -> None:
    attn = _module()
    assert attn.qkv.weight.shape == (18, 8) and attn.out.weight.shape == (8, 6)
    assert attn(torch.randn(2, 5, 8)).shape == (2, 5, 8)


@pytest.mark.parametrize("causal", [True, False])
def test_a_causal_query_never_sees_a_later_position(causal: bool) -> None:
    attn = _module(causal)
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(1))
    changed = x.clone()
    changed[:, 4:] += 1.0
    with torch.no_grad():
        same = torch.allclose(attn(x)[:, :4], attn(changed)[:, :4])
    assert same == causal


def test_the_kv_cache_decodes_like_the_full_pass_one_token_or_a_chunk_at_a_time() -> None:
    attn = _module()
    x = torch.randn(2, 7, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = attn(x)
        cache = KVCache()
        parts = [attn(x[:, a:b], cache=cache) for a, b in ((0, 3), (3, 4), (4, 6), (6, 7))]
    assert cache.length == 7
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-6, rtol=0)
