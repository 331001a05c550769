"""Transformer-XL relative attention (Dai et al., 2019; HT eqs. 10-17) against its reference.

The oracle is :func:`highway_transformer.nn.reference.rel_multihead_attention` in float64 from
the module's own weights: every score ``A_ij = q_iᵀk_j + q_iᵀW_kR R_{M+i-j} + uᵀk_j +
vᵀW_kR R_{M+i-j}`` term by term with each pair's distance (no shift), the mask as the
reference code builds it (causal; ``same_length``: only the ``M`` most recent keys).
"""

from __future__ import annotations

import math

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.dropout import keep_draw
from highway_transformer.nn.relative import RelativeMultiHeadAttention, relative_attention_mask
from highway_transformer.nn.relative_core import relative_attention, shifted_view, zero_rows

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


def core_oracle(q_u, q_v, key, value, r_rows, mask, scale, dropout):  # noqa: ANN001, ANN201
    """:func:`relative_attention` by :func:`reference.rel_scores` (the reference code's
    ``_rel_shift``) and :func:`reference.rel_attend`, its operands laid out time-major:
    ``[H·B, N, dh]`` and ``[H, B·L, dh]`` -> ``[N, B, H, dh]``; the position keys after the
    zero rows, ``[H, K, dh]`` -> ``[K, H, dh]``; the dropout mask drawn as the core draws it."""
    n_h = q_v.shape[0]
    hb, q_len, d_h = q_u.shape
    bsz, k_len = hb // n_h, key.shape[1]

    def time_major(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(n_h, bsz, -1, d_h).permute(2, 1, 0, 3)

    keep = None
    if dropout > 0:
        keep = keep_draw((hb, q_len, k_len), dropout).to(q_u.dtype) / (1 - dropout)
        keep = keep.view(n_h, bsz, q_len, k_len).permute(2, 3, 1, 0)  # [L, K, B, H]
    r_k = r_rows[:, -k_len:].transpose(0, 1)  # [K, H, dh], distances K-1 … 0
    scores = reference.rel_scores(time_major(q_u), time_major(q_v), time_major(key), r_k)
    out = reference.rel_attend(scores, time_major(value), mask, scale, keep)  # [L, B, H, dh]
    return out.permute(2, 1, 0, 3).reshape(hb, q_len, d_h)


@pytest.mark.parametrize("q_len", [1, 4])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("pad", [1, 3, 7])  # zero rows: a CPU's 1, a GPU's up to aligned rows
def test_core_matches_autograd_oracle_in_fp64(
    q_len: int, dropout: float, with_mask: bool, pad: int
) -> None:
    g = torch.Generator().manual_seed(q_len)
    n_h, bsz, d_h, mem_len = 2, 3, 4, 5
    k_len = mem_len + q_len

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()

    operands = (
        rand(n_h * bsz, q_len, d_h),
        rand(n_h, bsz * q_len, d_h),
        rand(n_h * bsz, k_len, d_h),
        rand(n_h * bsz, k_len, d_h),
        rand(n_h, k_len, d_h),
    )
    if q_len > 1:  # the zero rows the module prepends
        operands = (*operands[:4], torch.cat([torch.zeros(n_h, pad, d_h), operands[4]], 1))
    causal = relative_attention_mask(q_len, mem_len)
    mask = causal | relative_attention_mask(q_len, mem_len, same_length=True, window=3)
    mask = mask if with_mask else (causal if q_len > 1 else None)
    scale = 1 / math.sqrt(d_h)
    torch.manual_seed(11)
    fast = relative_attention(*operands, mask, scale, dropout)
    torch.manual_seed(11)
    slow = core_oracle(*operands, mask, scale, dropout)
    torch.testing.assert_close(fast, slow, atol=1e-12, rtol=0)
    upstream = torch.randn(fast.shape, generator=g, dtype=torch.float64)
    leaves = [t for t in operands if t.is_leaf]
    for a, b in zip(
        torch.autograd.grad((fast * upstream).sum(), leaves),
        torch.autograd.grad((slow * upstream).sum(), leaves),
        strict=True,
    ):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
        assert b.abs().max() > 0


@pytest.mark.parametrize(("q_len", "mem_len"), [(1, 4), (3, 0), (4, 6), (6, 2)])
def test_shifted_view_of_padded_rows_is_rel_shift(q_len: int, mem_len: int) -> None:
    """The zero row prepended to the position keys gives rel_shift's padding column: the
    view of the padded product equals the reference shift of the plain one."""
    g = torch.Generator().manual_seed(0)
    n_h, bsz, d_h, k_len = 2, 3, 4, mem_len + q_len
    q = torch.randn(n_h, bsz * q_len, d_h, generator=g, dtype=torch.float64)
    r = torch.randn(n_h, k_len, d_h, generator=g, dtype=torch.float64)
    plain = (q @ r.transpose(1, 2)).view(n_h * bsz, q_len, k_len)
    expected = reference.rel_shift(plain.permute(1, 2, 0)).permute(2, 0, 1)  # on [L, K, ·]
    visible = ~relative_attention_mask(q_len, mem_len)  # rel_shift's other entries are junk
    for pad in (1, 2, 5):
        rows = torch.cat([torch.zeros_like(r[:, :pad]), r], 1) if q_len > 1 else r
        got = shifted_view(q @ rows.transpose(1, 2), bsz, q_len, k_len)
        # (the products' blocking may differ in the last bit)
        torch.testing.assert_close(got[:, visible], expected[:, visible], atol=1e-12, rtol=0)


def test_zero_rows_align_the_position_score_rows_on_a_gpu_only() -> None:
    assert zero_rows(1024, torch.device("cpu")) == 1  # the reference's one padding column
    assert zero_rows(1024, torch.device("cuda")) == 8  # rows of 1032: 16-byte aligned in bf16
    assert zero_rows(1023, torch.device("cuda")) == 1
