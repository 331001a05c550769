"""The Transformer-XL attention core (``nn/kernels/relative_core.py``) in float64 against the
reference code's ``_rel_shift`` (:mod:`highway_transformer.nn.reference`): outputs and gradients,
the shifted view of the zero-padded position rows, and the rows' alignment."""

from __future__ import annotations

import math

import pytest
import torch

from highway_transformer.nn import reference
from highway_transformer.nn.dropout import keep_draw
from highway_transformer.nn.kernels.relative_core import relative_attention, shifted_view, zero_rows
from highway_transformer.nn.relative import relative_attention_mask


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


@pytest.mark.parametrize("pad", [1, 3])
def test_the_compiled_unshift_writes_what_the_eager_one_does(
    pad: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under torch.compile the gradient of the shifted view is laid back by
    ``as_strided_scatter`` (a write through the view cannot be compiled): the same rows."""
    from highway_transformer.nn.kernels.relative_core import _unshift

    n_h, bsz, q_len, k_len = 2, 3, 4, 6
    d_scores = torch.randn(n_h * bsz, q_len, k_len, dtype=torch.float64)
    eager = _unshift(d_scores, n_h, bsz, q_len, k_len + pad)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert torch.equal(_unshift(d_scores, n_h, bsz, q_len, k_len + pad), eager)
