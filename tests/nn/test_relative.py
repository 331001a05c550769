"""Transformer-XL relative attention (Dai et al., 2019; HT eqs. 10-17) against its reference.

The oracle is :func:`highway_transformer.nn.reference.rel_multihead_attention` in float64 from
the module's own weights: every score ``A_ij = q_iᵀk_j + q_iᵀW_kR R_{M+i-j} + uᵀk_j +
vᵀW_kR R_{M+i-j}`` term by term with each pair's distance (no shift), the mask as the
reference code builds it (causal; ``same_length``: only the ``M`` most recent keys).
"""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.relative import RelativeMultiHeadAttention, relative_attention_mask

D_MODEL, N_HEADS, D_HEAD = 12, 3, 4


def oracle(
    m: RelativeMultiHeadAttention,
    h: torch.Tensor,
    memory: torch.Tensor | None,
    clamp_len: int = 0,
    same_length: bool = False,
) -> torch.Tensor:
    """The reference of the module's forward in float64 (differentiable into ``h``, the
    memory and the module's parameters), cast back to ``h``'s dtype."""
    dt = torch.float64
    out = reference.rel_multihead_attention(
        h.to(dt),
        None if memory is None else memory.to(dt),
        reference.rel_attention_weights(m).to(dt),
        m.n_heads,
        clamp_len=clamp_len,
        same_length=same_length,
        shift=False,
    )
    return out.to(h.dtype)


def make(seed: int = 0, n_heads: int = N_HEADS, **kw: float) -> RelativeMultiHeadAttention:
    torch.manual_seed(seed)
    m = RelativeMultiHeadAttention(D_MODEL, n_heads, D_HEAD, **kw)
    # Larger biases than the 0.02 init so the u / v terms matter in the comparison.
    with torch.no_grad():
        m.r_w_bias.normal_(std=0.5)
        m.r_r_bias.normal_(std=0.5)
    return m


def inputs(bsz: int, q_len: int, mem_len: int | None, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(bsz, q_len, D_MODEL, generator=g, requires_grad=True)
    mem = None
    if mem_len is not None:
        mem = torch.randn(bsz, mem_len, D_MODEL, generator=g, requires_grad=True)
    return h, mem


CASES = [
    # (L, M, clamp_len, same_length, n_heads)
    (5, None, -1, False, 3),
    (5, 3, -1, False, 3),  # M < L
    (4, 7, -1, False, 2),  # M > L
    (5, 0, -1, False, 3),  # empty memory
    (5, 3, 2, False, 3),  # clamp_len
    (4, 6, 0, False, 1),  # clamp_len 0: no clamping (the reference clamps only when > 0)
    (4, 6, -1, False, 1),  # clamp_len -1: no clamping
    (5, 3, -1, True, 3),  # same_length, M < L
    (3, 5, 4, True, 2),  # same_length, M > L, clamp_len
    (4, 0, -1, True, 3),  # same_length with no memory falls back to causal
    (1, 4, -1, False, 2),  # one query: no shift, no padding
]


@pytest.mark.parametrize(("q_len", "mem_len", "clamp_len", "same_length", "n_heads"), CASES)
def test_matches_bruteforce_outputs_and_gradients(q_len, mem_len, clamp_len, same_length, n_heads):
    m = make(n_heads=n_heads)
    h, mem = inputs(2, q_len, mem_len)
    fast = m(h, mem, clamp_len=clamp_len, same_length=same_length)
    slow = oracle(m, h, mem, clamp_len=clamp_len, same_length=same_length)
    assert fast.shape == (2, q_len, D_MODEL)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)

    upstream = torch.randn(fast.shape, generator=torch.Generator().manual_seed(7))
    has_mem = mem is not None and mem.shape[1] > 0
    wrt = [h] + ([mem] if has_mem else []) + list(m.parameters())
    g_fast = torch.autograd.grad((fast * upstream).sum(), wrt)
    g_slow = torch.autograd.grad((slow * upstream).sum(), wrt)
    names = ["h"] + (["memory"] if has_mem else []) + [n for n, _ in m.named_parameters()]
    for name, a, b in zip(names, g_fast, g_slow, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=lambda s, n=name: f"{n}: {s}")
        assert b.abs().max() > 0, name  # the gradient is really exercised


def test_large_clamp_len_is_no_clamp():
    m = make()
    h, mem = inputs(2, 4, 3)
    torch.testing.assert_close(m(h, mem, clamp_len=50), m(h, mem))
    assert not torch.allclose(m(h, mem, clamp_len=1), m(h, mem))


@pytest.mark.parametrize("same_length", [False, True])
def test_causal(same_length):
    m = make()
    h, mem = inputs(2, 6, 4)
    base = m(h, mem, same_length=same_length).detach()
    for t in range(5):
        h2 = h.detach().clone()
        h2[:, t + 1 :] += torch.randn_like(h2[:, t + 1 :])
        out = m(h2, mem, same_length=same_length).detach()
        torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=0, rtol=0)
        assert not torch.allclose(out[:, t + 1], base[:, t + 1])


def test_memory_is_attended():
    m = make()
    h, mem = inputs(2, 4, 3)
    assert not torch.allclose(m(h, mem), m(h, mem + 1.0))


def test_none_memory_equals_empty_memory():
    m = make()
    h, _ = inputs(2, 5, None)
    empty = h.new_zeros(2, 0, D_MODEL)
    torch.testing.assert_close(m(h, None), m(h, empty), atol=0, rtol=0)
    torch.testing.assert_close(m(h, None, same_length=True), m(h, empty), atol=0, rtol=0)


def test_same_length_window():
    """Every query sees exactly its M most recent keys, as in the reference code's mask."""
    for q_len, mem_len in [(4, 3), (3, 5), (5, 5)]:
        mask = relative_attention_mask(q_len, mem_len, same_length=True)
        assert torch.equal(mask, reference.xl_attention_mask(q_len, mem_len, same_length=True))
        assert torch.equal((~mask).sum(1), torch.full((q_len,), mem_len))


def test_same_length_window_while_memory_fills():
    """The window is the configured memory length W, not the memory held (reference rule):
    with M < W keys held every query still sees at most its W most recent keys."""
    for q_len, held, window in [(4, 0, 2), (4, 1, 3), (3, 2, 6), (5, 0, 5)]:
        mask = relative_attention_mask(q_len, held, same_length=True, window=window)
        assert torch.equal(mask, reference.xl_attention_mask(q_len, held, True, window))
        visible = torch.minimum(torch.arange(q_len) + held + 1, torch.tensor(window))
        assert torch.equal((~mask).sum(1), visible)


def test_dropout_only_in_training():
    m = make(dropout_attn=0.5)
    ref = make(dropout_attn=0.0)
    h, mem = inputs(2, 5, 3)
    m.eval()
    torch.testing.assert_close(m(h, mem), ref(h, mem))
    m.train()
    torch.manual_seed(3)
    assert not torch.allclose(m(h, mem), ref(h, mem))


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((2, 3, 8), "memory has width 8 but the model's d_model is 12"),
        ((3, 3, D_MODEL), "memory has batch size 3 but h has 2"),
        ((3, D_MODEL), r"memory must have shape \[batch, mem_len, 12\]"),
    ],
)
def test_bad_memory(shape, message):
    m = make()
    h, _ = inputs(2, 4, None)
    with pytest.raises(ConfigError, match=message):
        m(h, torch.zeros(shape))


@pytest.mark.parametrize("clamp_len", [1.5, True, "3"])
def test_bad_clamp_len(clamp_len):
    m = make()
    h, _ = inputs(2, 4, None)
    with pytest.raises(ConfigError, match="clamp_len"):
        m(h, clamp_len=clamp_len)


def test_bad_h_and_config():
    m = make()
    with pytest.raises(ConfigError, match="h must have shape"):
        m(torch.zeros(2, 4, 5))
    with pytest.raises(ConfigError, match="n_heads"):
        RelativeMultiHeadAttention(8, 0, 4)
    with pytest.raises(ConfigError, match="dropout_attn"):
        RelativeMultiHeadAttention(8, 2, 4, dropout_attn=1.0)


@pytest.mark.parametrize("same_length", [False, True])
def test_bf16_runs_without_nan(same_length):
    m = make()
    h, mem = inputs(2, 6, 5)
    ref = m(h, mem, clamp_len=3, same_length=same_length).detach()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(h.detach(), mem.detach(), clamp_len=3, same_length=same_length)
    assert out.dtype == torch.bfloat16
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), ref, atol=0.1, rtol=0.1)

    m_bf = make().to(torch.bfloat16)
    h_bf = h.detach().to(torch.bfloat16).requires_grad_()
    out_bf = m_bf(h_bf, mem.detach().to(torch.bfloat16), same_length=same_length)
    out_bf.float().sum().backward()
    assert out_bf.dtype == torch.bfloat16
    assert torch.isfinite(out_bf).all() and torch.isfinite(h_bf.grad).all()
