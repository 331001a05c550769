"""Transformer-XL attention's readable branch (:class:`RelativeMultiHeadAttention`'s forward
inside :func:`kernels.readable`: ``AC``, ``BD``, ``rel_shift``) against the term-by-term oracle
:func:`highway_transformer.nn.reference.rel_multihead_attention` (float32 1e-5, float64
1e-10; outputs and gradients), and the kernel branch against it (fast == readable)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from highway_transformer.nn import kernels, reference
from highway_transformer.nn.relative import RelativeMultiHeadAttention, RelativePositions

D_MODEL, N_HEADS, D_HEAD = 12, 3, 4
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
CASES = [  # (L, M, clamp_len, same_length)
    (5, None, 0, False),
    (4, 7, 0, False),
    (5, 3, 2, False),
    (3, 5, 0, True),
    (1, 4, 0, False),  # one query: no mask, no shift
]


def _module(dtype: torch.dtype) -> RelativeMultiHeadAttention:
    torch.manual_seed(0)
    m = RelativeMultiHeadAttention(D_MODEL, N_HEADS, D_HEAD).to(dtype)
    with torch.no_grad():  # larger biases than the 0.02 init, so u and v matter
        m.r_w_bias.normal_(std=0.5)
        m.r_r_bias.normal_(std=0.5)
    return m


def _inputs(q_len: int, mem_len: int | None, dtype: torch.dtype) -> tuple[Tensor, Tensor | None]:
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, q_len, D_MODEL, generator=g, dtype=dtype, requires_grad=True)
    if mem_len is None:
        return h, None
    return h, torch.randn(2, mem_len, D_MODEL, generator=g, dtype=dtype, requires_grad=True)


def _oracle(
    m: RelativeMultiHeadAttention, h: Tensor, memory: Tensor | None, **kw: object
) -> Tensor:
    weights = reference.rel_attention_weights(m)
    return reference.rel_multihead_attention(h, memory, weights, m.n_heads, shift=False, **kw)


def _close_with_gradients(got: Tensor, want: Tensor, wrt: list[Tensor], tol: float) -> None:
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    upstream = torch.randn(got.shape, generator=torch.Generator().manual_seed(7), dtype=got.dtype)
    g_got = torch.autograd.grad((got * upstream).sum(), wrt)
    g_want = torch.autograd.grad((want * upstream).sum(), wrt)
    for i, (a, b) in enumerate(zip(g_got, g_want, strict=True)):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=lambda s, i=i: f"operand {i}: {s}")
        assert b.abs().max() > 0, i  # the gradient is really exercised


def _wrt(m: RelativeMultiHeadAttention, h: Tensor, memory: Tensor | None) -> list[Tensor]:
    return [h, *([memory] if memory is not None else []), *m.parameters()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("q_len", "mem_len", "clamp_len", "same_length"), CASES)
def test_the_readable_branch_is_the_oracle(
    q_len: int, mem_len: int | None, clamp_len: int, same_length: bool, dtype: torch.dtype
) -> None:
    m = _module(dtype)
    h, memory = _inputs(q_len, mem_len, dtype)
    kw = {"clamp_len": clamp_len, "same_length": same_length}
    with kernels.readable():
        got = m(h, memory, **kw)
    _close_with_gradients(got, _oracle(m, h, memory, **kw), _wrt(m, h, memory), TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("q_len", "mem_len", "clamp_len", "same_length"), CASES)
def test_the_kernel_branch_is_the_readable_one(
    q_len: int, mem_len: int | None, clamp_len: int, same_length: bool, dtype: torch.dtype
) -> None:
    m = _module(dtype)
    h, memory = _inputs(q_len, mem_len, dtype)
    kw = {"clamp_len": clamp_len, "same_length": same_length}
    with kernels.readable():
        slow = m(h, memory, **kw)
    _close_with_gradients(m(h, memory, **kw), slow, _wrt(m, h, memory), TOLERANCE[dtype])


def test_shared_biases_and_decoding_cache_match_across_branches() -> None:
    """Shared u / v from :class:`RelativePositions` and the KV cache of one-token decoding."""
    torch.manual_seed(0)
    positions = RelativePositions(D_MODEL, N_HEADS, D_HEAD, 0.0, shared_biases=True).double()
    m = RelativeMultiHeadAttention(D_MODEL, N_HEADS, D_HEAD, own_biases=False).double().eval()
    x = torch.randn(2, 6, D_MODEL, dtype=torch.float64)
    outputs = []
    for branch in ("fast", "readable"):
        cache: dict = {}
        steps = []
        with torch.no_grad(), kernels.readable() if branch == "readable" else torch.enable_grad():
            for t in range(x.shape[1]):
                memory = x[:, :t]
                relative = positions(1, t, x)
                steps.append(m(x[:, t : t + 1], memory, relative=relative, cache=cache))
        outputs.append(torch.cat(steps, 1))
    weights = reference.rel_attention_weights(m, positions.r_w_bias, positions.r_r_bias)
    want = torch.cat(
        [
            reference.rel_multihead_attention(x[:, t : t + 1], x[:, :t], weights, N_HEADS)
            for t in range(x.shape[1])
        ],
        1,
    )
    torch.testing.assert_close(outputs[0], want, atol=1e-10, rtol=0)
    torch.testing.assert_close(outputs[1], want, atol=1e-10, rtol=0)
