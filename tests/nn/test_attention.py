"""Multi-head dot-product attention (``nn/attention.py``): the causal mask, ``attend`` against
:func:`highway_transformer.nn.reference.scaled_dot_attention` in float64, and the module's
causality and KV cache, one token or a chunk at a time."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn import reference
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
