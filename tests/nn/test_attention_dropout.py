"""Attention with dropout a block of queries at a time (``nn/attention_dropout.py``): forward
and gradients against the reference maths fed the mask the blocks drew, in fp64 and fp32,
causal (also with more keys than queries), masked and unmasked, over several blocks."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn import attention, attention_dropout
from highway_transformer.nn.attention_dropout import block_attention
from highway_transformer.nn.dropout import KeepDraws
from highway_transformer.nn.reference import scaled_dot_attention


class RecordedDraws(KeepDraws):
    """Uniform draws from a seeded torch generator, each block's kept for the oracle."""

    def __init__(self, seed: int) -> None:
        self._torch_generator = torch.Generator().manual_seed(seed)
        self.blocks: list[torch.Tensor] = []

    def keep(self, shape: tuple[int, ...], p: float) -> torch.Tensor:
        draws = torch.rand(shape, generator=self._torch_generator)
        self.blocks.append(draws)
        return draws.ge(p).float()


def full_keep(draws: RecordedDraws, shape, n_queries: int, n_keys: int, causal: bool, p: float):
    """``[..., Lq, Lk]``: 1 / (1 − p) where a block kept the weight, 0 where it dropped it;
    a causal block's unread keys (hidden anyway) get 1."""
    keep = torch.ones(shape[:-2] + (n_queries, n_keys), dtype=torch.float64)
    rows = attention_dropout.block_rows(shape[:-2].numel(), n_keys)
    blocks = attention_dropout._blocks(n_queries, rows)
    assert len(blocks) == len(draws.blocks)
    for (start, end), drawn in zip(blocks, draws.blocks, strict=True):
        key_end = attention_dropout._key_end(end, n_keys - n_queries, n_keys, causal)
        keep[..., start:end, :key_end] = (drawn >= p).double() / (1 - p)
    return keep


def allowed_keys(mask, n_queries: int, n_keys: int, causal: bool) -> torch.Tensor:
    allowed = torch.ones(n_queries, n_keys, dtype=torch.bool)
    if causal:
        allowed = attention.causal_mask(n_queries, n_keys, torch.device("cpu"))
    return allowed if mask is None else allowed & mask


CASES = {
    "causal": (7, 7, True, False),
    "causal, more keys than queries": (5, 9, True, False),
    "mask": (6, 8, False, True),
    "causal and a batch mask": (7, 7, True, True),
    "none": (6, 6, False, False),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_blocks_compute_the_reference_with_the_drawn_mask(monkeypatch, case, dtype, tolerance):
    monkeypatch.setattr(attention_dropout, "BLOCK_ELEMENTS", 2 * 3 * 2 * 9)  # 2-3 query rows
    n_queries, n_keys, causal, masked = CASES[case]
    torch.manual_seed(11)
    b, h, d, p, scale = 2, 3, 4, 0.3, 0.7
    q = torch.randn(b, h, n_queries, d, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(b, h, n_keys, d, dtype=dtype, requires_grad=True) for _ in range(2))
    mask = None
    if masked:  # per batch row, broadcast over heads; every query keeps key 0
        mask = torch.rand(b, 1, n_queries, n_keys) < 0.6
        mask[..., 0] = True
    draws = RecordedDraws(seed=5)
    out = block_attention(q, k, v, mask, causal, p, scale, draws)
    keep = full_keep(draws, q.shape, n_queries, n_keys, causal, p)
    allowed = allowed_keys(mask, n_queries, n_keys, causal)
    want = scaled_dot_attention(*(t.double() for t in (q, k, v)), ~allowed, scale, keep)
    assert len(draws.blocks) > 1  # the blocks really split the queries
    torch.testing.assert_close(out.double(), want, rtol=tolerance, atol=tolerance)
    weights = torch.randn_like(want)  # a loss whose gradient differs at every output
    grads = torch.autograd.grad((out.double() * weights).sum(), (q, k, v))
    want_grads = torch.autograd.grad((want * weights).sum(), (q, k, v))
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got.double(), expected.double(), rtol=tolerance, atol=tolerance)


def test_gradcheck_in_float64(monkeypatch) -> None:
    monkeypatch.setattr(attention_dropout, "BLOCK_ELEMENTS", 8)
    torch.manual_seed(12)
    q, k, v = (torch.randn(1, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))

    def attend(q, k, v):  # the same mask at every call: a fresh, identically seeded stream
        return block_attention(q, k, v, None, True, 0.25, None, RecordedDraws(seed=3))

    assert torch.autograd.gradcheck(attend, (q, k, v))


def test_seeded_calls_repeat_and_drop_at_the_rate() -> None:
    q, k, v = torch.randn(3, 4, 2, 300, 8).unbind(0)
    torch.manual_seed(7)
    first = block_attention(q, k, v, None, True, 0.2)
    torch.manual_seed(7)
    assert torch.equal(block_attention(q, k, v, None, True, 0.2), first)
    draws = RecordedDraws(seed=1)
    block_attention(q, k, v, None, False, 0.2, None, draws)
    dropped = torch.cat([block.flatten() for block in draws.blocks]) < 0.2
    assert dropped.numel() == 4 * 2 * 300 * 300
    assert abs(dropped.float().mean().item() - 0.2) < 0.002  # > 5 standard errors


def test_attend_takes_the_blocks_for_large_fp32_dropout_on_the_cpu(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(attention, "block_attention", lambda *args: calls.append(args) or args[0])
    monkeypatch.setattr(attention_dropout, "MIN_ELEMENTS", 2 * 6 * 6)
    q, k, v = torch.randn(3, 1, 2, 6, 4).unbind(0)
    attention.attend(q, k, v, None, True, 0.1)
    attention.attend(q, k, v, None, True, 0.0)  # no dropout: torch's fused kernel
    attention.attend(*(t.bfloat16() for t in (q, k, v)), None, True, 0.1)  # the written maths
    attention.attend(q[..., :5, :], k[..., :5, :], v[..., :5, :], None, True, 0.1)  # cached
    assert len(calls) == 1
