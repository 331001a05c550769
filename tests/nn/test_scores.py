"""Attention score functions (slides; REFERENCE §1) against their formulas computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from highway_transformer.config.names import SCORES, normalize_score
from highway_transformer.errors import ConfigError, DataError
from highway_transformer.nn.scores import ScoredAttention

D = 4


def _identity(score: str, max_len: int = 8) -> ScoredAttention:
    """One head with identity projections: output = softmax(score(s, h)) @ h."""
    torch.manual_seed(0)
    attn = ScoredAttention(D, 1, score, max_len=max_len).eval()
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out):
            proj.weight.copy_(torch.eye(D))
            proj.bias.zero_()
    return attn


def _by_hand(scores: list[list[float]], memory: torch.Tensor) -> torch.Tensor:
    """Softmax over each row of plain-Python scores, then the weighted sum of ``memory``."""
    rows = []
    for row in scores:
        top = max(row)
        exps = [math.exp(v - top) for v in row]
        total = sum(exps)
        rows.append([e / total for e in exps])
    return torch.tensor(rows, dtype=torch.float64) @ memory.double()


def _dot(a: torch.Tensor, b: torch.Tensor) -> float:
    return sum(float(x) * float(y) for x, y in zip(a, b, strict=True))


@pytest.fixture
def tensors() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(1, 3, D, generator=g), torch.randn(1, 5, D, generator=g)


def test_scaled_dot(tensors):
    s, h = tensors
    expected = _by_hand([[_dot(si, hj) / math.sqrt(D) for hj in h[0]] for si in s[0]], h[0])
    out = _identity("scaled_dot")(s, h)
    torch.testing.assert_close(out[0].double(), expected, atol=1e-5, rtol=1e-5)


def test_dot(tensors):
    s, h = tensors
    expected = _by_hand([[_dot(si, hj) for hj in h[0]] for si in s[0]], h[0])
    out = _identity("dot")(s, h)
    torch.testing.assert_close(out[0].double(), expected, atol=1e-5, rtol=1e-5)


def test_general(tensors):
    s, h = tensors
    attn = _identity("general")
    w = torch.randn(D, D, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        attn.w_general.copy_(w[None])
    scores = [
        [
            sum(float(si[a]) * float(w[a, b]) * float(hj[b]) for a in range(D) for b in range(D))
            for hj in h[0]
        ]
        for si in s[0]
    ]
    torch.testing.assert_close(attn(s, h)[0].double(), _by_hand(scores, h[0]), atol=1e-5, rtol=1e-5)


def test_general_starts_as_dot(tensors):
    s, h = tensors
    torch.testing.assert_close(_identity("general")(s, h), _identity("dot")(s, h))


def test_additive(tensors):
    s, h = tensors
    attn = _identity("additive")
    w_a = torch.cat([attn.w_query[0], attn.w_key[0]], dim=0).detach()  # [2D, e]
    v = attn.v_additive[0].detach()
    assert w_a.shape == (2 * D, D)
    scores = []
    for si in s[0]:
        row = []
        for hj in h[0]:
            concat = torch.cat([si, hj])  # [s; h]
            hidden = [math.tanh(_dot(concat, w_a[:, e])) for e in range(w_a.shape[1])]
            row.append(_dot(v, torch.tensor(hidden)))
        scores.append(row)
    torch.testing.assert_close(attn(s, h)[0].double(), _by_hand(scores, h[0]), atol=1e-5, rtol=1e-5)


def test_content_cosine(tensors):
    s, h = tensors
    scores = [[_dot(si, hj) / math.sqrt(_dot(si, si) * _dot(hj, hj)) for hj in h[0]] for si in s[0]]
    out = _identity("content")(s, h)
    torch.testing.assert_close(out[0].double(), _by_hand(scores, h[0]), atol=1e-5, rtol=1e-5)
    assert normalize_score("cosine") == "content"


def test_location_uses_only_the_query(tensors):
    s, h = tensors
    attn = _identity("location", max_len=8)
    w = attn.w_location[0].detach()  # [D, max_len]
    n_keys = h.shape[1]
    scores = [[_dot(si, w[:, j]) for j in range(n_keys)] for si in s[0]]  # (W_a s_t)_j, j < Lk
    torch.testing.assert_close(attn(s, h)[0].double(), _by_hand(scores, h[0]), atol=1e-5, rtol=1e-5)
    # the weights do not depend on the keys: other keys, same values, same output
    with torch.no_grad():
        attn.k_proj.weight.mul_(-3.0)
    torch.testing.assert_close(attn(s, h)[0].double(), _by_hand(scores, h[0]), atol=1e-5, rtol=1e-5)


def test_location_needs_and_enforces_max_len(tensors):
    s, h = tensors
    with pytest.raises(ConfigError, match="max_len"):
        ScoredAttention(D, 1, "location")
    with pytest.raises(DataError, match="task.max_len=4"):
        _identity("location", max_len=4)(s, h)


def test_unknown_score():
    with pytest.raises(ConfigError, match="choose one of"):
        ScoredAttention(D, 1, "bilinearish")


@pytest.mark.parametrize("score", SCORES)
def test_padding_equals_truncation_and_empty_rows_are_zero(score, tensors):
    s, h = tensors
    attn = _identity(score)
    pad = torch.tensor([[False, False, False, True, True]])
    masked = attn(s, h, key_padding_mask=pad)
    if score != "location":  # location weights index positions: truncation keeps them
        torch.testing.assert_close(masked, attn(s, h[:, :3]))
    else:
        torch.testing.assert_close(masked, attn(s, h[:, :3]), atol=1e-6, rtol=1e-5)
    empty = attn(s, h, key_padding_mask=torch.ones(1, 5, dtype=torch.bool))
    assert torch.isfinite(empty).all()
    assert torch.equal(empty, torch.zeros_like(empty))


@pytest.mark.parametrize("score", SCORES)
def test_causal_rows_see_only_the_past(score):
    torch.manual_seed(1)
    attn = ScoredAttention(8, 2, score, max_len=6).eval()
    x = torch.randn(2, 6, 8)
    out = attn(x, causal=True)
    for t in range(6):
        torch.testing.assert_close(out[:, t], attn(x[:, : t + 1], causal=True)[:, t])


def test_multi_head_scaled_dot_matches_manual_heads():
    torch.manual_seed(2)
    attn = ScoredAttention(8, 2, "scaled_dot").eval()
    q_in, m_in = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    q, k, v = attn.q_proj(q_in), attn.k_proj(m_in), attn.v_proj(m_in)
    heads = []
    for head in range(2):
        cols = slice(4 * head, 4 * head + 4)
        weights = (q[0, :, cols] @ k[0, :, cols].T / 2.0).softmax(-1)
        heads.append(weights @ v[0, :, cols])
    expected = attn.out(torch.cat(heads, dim=-1))
    torch.testing.assert_close(attn(q_in, m_in)[0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("score", ["scaled_dot", "additive"])
def test_bf16_masks_are_finite(score):
    torch.manual_seed(4)
    attn = ScoredAttention(8, 2, score).to(torch.bfloat16).eval()
    x = torch.randn(2, 5, 8, dtype=torch.bfloat16)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    out = attn(x, key_padding_mask=pad, causal=True)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
