"""Shaw et al. (2018) relation-aware attention: efficient form against a brute-force oracle."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.shaw import ShawAttention, relative_buckets

ATOL = 1e-5


def oracle(attn: ShawAttention, h: torch.Tensor) -> torch.Tensor:
    """Shaw eqs. 2-4 from the definition (:func:`reference.shaw_multihead_attention`): the
    ``[L, L, d_head]`` tables a^K and a^V built entry by entry from ``clip(j − i, −k, k)``,
    ``e_ij`` and ``z_i`` with explicit ``k_j + a^K_ij`` and ``v_j + a^V_ij`` pairs."""
    weights = reference.attention_weights(attn.qkv, attn.out)
    return reference.shaw_multihead_attention(
        h, weights, attn.rel_k.weight, attn.rel_v.weight, attn.n_heads, attn.clip, attn.causal
    )


def _module(clip: int, causal: bool, d: int = 16, heads: int = 2) -> ShawAttention:
    torch.manual_seed(0)
    attn = ShawAttention(d, heads, clip, causal=causal)
    with torch.no_grad():  # make every parameter matter, biases included
        for p in attn.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return attn


def _grads(attn: ShawAttention, h: torch.Tensor, fn) -> tuple[torch.Tensor, dict]:
    attn.zero_grad(set_to_none=True)
    h = h.detach().clone().requires_grad_(True)
    out = fn(attn, h)
    torch.manual_seed(5)
    (out * torch.randn_like(out)).sum().backward()
    return out.detach(), h.grad, {n: p.grad.clone() for n, p in attn.named_parameters()}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("clip", [1, 2, 3, 7, 12])
def test_efficient_matches_oracle_outputs_and_gradients(clip: int, causal: bool) -> None:
    length = 7  # clip 7 and 12 are >= L: no distance is clipped
    attn = _module(clip, causal)
    h = torch.randn(2, length, 16, generator=torch.Generator().manual_seed(1))
    out, gh, gp = _grads(attn, h, lambda m, x: m(x))
    ref, rh, rp = _grads(attn, h, oracle)
    assert out.shape == (2, length, 16)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)
    torch.testing.assert_close(gh, rh, atol=ATOL, rtol=0)
    assert gp.keys() == rp.keys() == {n for n, _ in attn.named_parameters()}
    for name in gp:
        torch.testing.assert_close(gp[name], rp[name], atol=ATOL, rtol=0, msg=name)


def test_relative_buckets_definition() -> None:
    buckets = relative_buckets(5, 2)
    for i in range(5):
        for j in range(5):
            assert buckets[i, j] == max(-2, min(2, j - i)) + 2


@pytest.mark.parametrize("causal", [True, False])
def test_unused_distance_rows_get_no_gradient(causal: bool) -> None:
    """With k >= L only distances |j − i| <= L − 1 occur (and j <= i when causal)."""
    length, clip = 4, 6
    attn = _module(clip, causal)
    h = torch.randn(2, length, 16, generator=torch.Generator().manual_seed(2))
    attn(h).square().sum().backward()
    for table in (attn.rel_k, attn.rel_v):
        used = (table.weight.grad.abs().sum(-1) > 0).nonzero().flatten().tolist()
        distances = [r - clip for r in used]
        expected = list(range(-(length - 1), 1 if causal else length))
        assert distances == expected


def test_distances_beyond_clip_share_one_embedding() -> None:
    """A clip-k table equals a larger table whose rows beyond ±k repeat the edge rows."""
    length, k, big = 9, 2, 6
    for causal in (True, False):
        small = _module(k, causal)
        large = ShawAttention(16, 2, big, causal=causal)
        large.qkv.load_state_dict(small.qkv.state_dict())
        large.out.load_state_dict(small.out.state_dict())
        with torch.no_grad():
            for s_tab, l_tab in ((small.rel_k, large.rel_k), (small.rel_v, large.rel_v)):
                for dist in range(-big, big + 1):
                    l_tab.weight[dist + big] = s_tab.weight[max(-k, min(k, dist)) + k]
        h = torch.randn(1, length, 16, generator=torch.Generator().manual_seed(3))
        torch.testing.assert_close(small(h), large(h), atol=ATOL, rtol=0)
        # Changing the large table's rows beyond ±k does change the result (they are used).
        with torch.no_grad():
            large.rel_k.weight[0] += 1.0
        assert not torch.allclose(small(h), large(h), atol=1e-4)


def test_moving_a_token_beyond_the_clip_does_not_change_the_output() -> None:
    """Keys farther than k from the query all use the edge row a_{±k}: moving the one
    distinct token among them leaves that query's output unchanged (softmax is
    permutation-invariant over the pairs (content_j, a_ij))."""
    length, k = 10, 2
    attn = _module(k, causal=False)
    background = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(4))
    marker = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(5))

    def with_marker_at(p: int) -> torch.Tensor:
        h = background.repeat(1, length, 1)
        h[:, p] = marker[:, 0]
        return attn(h)

    far = [with_marker_at(p)[:, 0] for p in (k + 1, k + 3, length - 1)]
    torch.testing.assert_close(far[0], far[1], atol=ATOL, rtol=0)
    torch.testing.assert_close(far[0], far[2], atol=ATOL, rtol=0)
    # Within the clip the distance matters.
    near = with_marker_at(k - 1)[:, 0]
    assert not torch.allclose(near, far[0], atol=1e-4)


@pytest.mark.parametrize("clip", [1, 3])
def test_causal_future_does_not_leak(clip: int) -> None:
    attn = _module(clip, causal=True)
    h = torch.randn(2, 10, 16, generator=torch.Generator().manual_seed(6))
    base = attn(h)
    for t in (0, 4, 8):
        perturbed = h.clone()
        perturbed[:, t + 1 :] += torch.randn_like(perturbed[:, t + 1 :])
        out = attn(perturbed)
        torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=0, rtol=0)
        assert not torch.allclose(out[:, t + 1], base[:, t + 1])


def test_non_causal_sees_the_future() -> None:
    attn = _module(2, causal=False)
    h = torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(7))
    perturbed = h.clone()
    perturbed[:, -1] += 1.0
    assert not torch.allclose(attn(h)[:, 0], attn(perturbed)[:, 0])


def test_attention_dropout_only_in_training() -> None:
    attn = _module(2, causal=True)
    attn.dropout_attn = 0.5
    h = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(8))
    attn.eval()
    torch.testing.assert_close(attn(h), oracle(attn, h), atol=ATOL, rtol=0)
    attn.train()
    torch.manual_seed(0)
    first = attn(h)
    torch.manual_seed(1)
    second = attn(h)
    assert not torch.allclose(first, second)


def test_bf16_runs_close_to_fp32() -> None:
    attn = _module(3, causal=True)
    h = torch.randn(2, 12, 16, generator=torch.Generator().manual_seed(9))
    ref = attn(h)
    out = attn.to(torch.bfloat16)(h.bfloat16())
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), ref, atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("clip", [0, -1])
def test_clip_below_one_raises(clip: int) -> None:
    with pytest.raises(ConfigError, match="clip distance must be >= 1"):
        ShawAttention(16, 2, clip)


def test_heads_must_divide_d_model() -> None:
    with pytest.raises(ConfigError, match="multiple of n_heads"):
        ShawAttention(10, 3, 2)
