"""Attention with dropout on its weights, one block of queries at a time, on the CPU.

``softmax(scale · q kᵀ + mask) · keep / (1 − p) · v``. Torch's fused CPU attention has no
dropout, and the maths written out (:func:`.attention.attend`'s other path) makes and reads
several ``[B, H, Lq, Lk]`` tensors forward and backward: at RT Table 1's MNIST size (784
pixels, ``B·H = 64``) each is 157 MB, far larger than any cache, and one layer's attention
took ten times as long with dropout as without. Here (flash attention's order, Dao et al.
2022, in torch operations):

* the queries are taken a block at a time (:func:`block_rows`: about 4 MB of scores), so
  the scores, probabilities and mask of a block stay in cache while they are used;
* a causal block reads only the keys up to its last query;
* the forward keeps the log-sum-exp of each row and the mask (one byte an element), not
  the probabilities; the backward recomputes them block by block, and the softmax's
  gradient takes the row sums ``D = rowsum(dO ∘ O)`` (dropout included: ``O`` is made of the
  kept weights).

The mask is drawn as every CPU mask here (:class:`.dropout.KeepDraws`), a block at a time in
query order: the same distribution as the written-out path, another stream of draws.

Oracle: :func:`.reference.scaled_dot_attention` with the mask the forward drew
(``tests/nn/test_attention_dropout.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .dropout import KeepDraws

#: Scores per block of queries (fp32: 4 MB; the fastest of 2^19-2^21 at the MNIST size).
BLOCK_ELEMENTS = 1 << 20


#: Scores (``B·H·Lq·Lk``) from which :func:`.attention.attend` takes the blocks: below, the
#: whole tensors fit the caches and the written-out maths is faster (one thread, AVX512,
#: 2026-11-28: 0.5-0.8x at 0.3-1.3 M scores, 1.0x at 3.3 M, 2.3-2.5x at 8-20 M, 2.7-3.5x at
#: RT Table 1's 39 M).
MIN_ELEMENTS = 4 * BLOCK_ELEMENTS


#: Dtypes that take the blocks; fp16/bf16 keep the written-out maths, whose softmax runs in fp32.
BLOCK_DTYPES = (torch.float32, torch.float64)


def takes_blocks(q: Tensor, k: Tensor) -> bool:
    """Whether CPU dropout attention of ``q`` over ``k`` runs a block of queries at a time:
    fp32/fp64 scores of at least :data:`MIN_ELEMENTS`, outside ``torch.compile``."""
    scores = q.shape[:-1].numel() * k.shape[-2]
    return q.dtype in BLOCK_DTYPES and scores >= MIN_ELEMENTS and not torch.compiler.is_compiling()


def block_rows(batch_heads: int, n_keys: int) -> int:
    """Queries per block: as many as keep ``batch_heads × rows × n_keys`` near
    :data:`BLOCK_ELEMENTS` (read at each call, so tests can make blocks small)."""
    return max(1, BLOCK_ELEMENTS // max(1, batch_heads * n_keys))


def _blocks(n_queries: int, rows: int) -> list[tuple[int, int]]:
    return [(start, min(start + rows, n_queries)) for start in range(0, n_queries, rows)]


def _key_end(end: int, offset: int, n_keys: int, causal: bool) -> int:
    """Keys a block of queries ending before ``end`` reads: all, or up to its last query."""
    return min(n_keys, end + offset) if causal else n_keys


def _block_scores(  # noqa: PLR0913 - one block's coordinates
    q: Tensor, k: Tensor, mask: Tensor | None, causal: bool, start: int, end: int, scale: float
) -> tuple[Tensor, int]:
    """``scale · q kᵀ`` of queries ``start:end`` over the keys they read, hidden keys at
    ``-inf``, and how many keys that is."""
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    offset = n_keys - n_queries
    key_end = _key_end(end, offset, n_keys, causal)
    scores = torch.matmul(q[..., start:end, :], k[..., :key_end, :].mT).mul_(scale)
    allowed = None if mask is None else mask[..., start:end, :key_end]
    if causal and end - start > 1:  # a block's first queries do not see its last keys
        queries = torch.arange(start, end)[:, None] + offset
        diagonal = torch.arange(key_end)[None, :] <= queries
        allowed = diagonal if allowed is None else allowed & diagonal
    if allowed is not None:  # added as a bias: one small [.., rows, keys] fill, broadcast
        bias = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill_(~allowed, float("-inf"))
        scores.add_(bias)
    return scores, key_end


class _BlockAttention(torch.autograd.Function):
    @staticmethod
    def forward(  # noqa: PLR0913 - attention's operands
        ctx,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        causal: bool,
        p: float,
        scale: float,
        draws: KeepDraws,
    ) -> Tensor:
        n_queries = q.shape[-2]
        rows = block_rows(q.shape[:-2].numel(), k.shape[-2])
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:-1], dtype=q.dtype)
        keeps = []  # per block: 1 / (1 - p) where a weight is kept, else 0
        for start, end in _blocks(n_queries, rows):
            scores, key_end = _block_scores(q, k, mask, causal, start, end, scale)
            top = scores.amax(dim=-1, keepdim=True)
            probs = scores.sub_(top).exp_()
            total = probs.sum(dim=-1, keepdim=True)
            probs.div_(total)
            lse[..., start:end] = (top + total.log()).squeeze(-1)
            keep = draws.keep(probs.shape, p).to(q.dtype).mul_(1.0 / (1.0 - p))
            keeps.append(keep)
            out[..., start:end, :] = torch.matmul(probs.mul_(keep), v[..., :key_end, :])
        ctx.save_for_backward(q, k, v, out, lse, mask, *keeps)
        ctx.causal, ctx.scale, ctx.rows = causal, scale, rows
        return out

    @staticmethod
    def backward(ctx, d_out: Tensor):  # noqa: ANN205 - autograd's signature
        q, k, v, out, lse, mask, *keeps = ctx.saved_tensors
        causal, scale = ctx.causal, ctx.scale
        d_out = d_out.contiguous()
        row_dot = (d_out * out).sum(dim=-1, keepdim=True)  # D = rowsum(dO ∘ O)
        d_q, d_k, d_v = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for (start, end), keep in zip(_blocks(q.shape[-2], ctx.rows), keeps, strict=True):
            scores, key_end = _block_scores(q, k, mask, causal, start, end, scale)
            q_block, k_keys, v_keys = q[..., start:end, :], k[..., :key_end, :], v[..., :key_end, :]
            g_block = d_out[..., start:end, :]
            probs = scores.sub_(lse[..., start:end, None]).exp_()
            # dP = (dO Vᵀ) ∘ Z / (1 − p); dS = P ∘ (dP − D), scaled
            d_scores = torch.matmul(g_block, v_keys.mT).mul_(keep)
            d_scores.sub_(row_dot[..., start:end, :]).mul_(probs).mul_(scale)
            d_q[..., start:end, :] = torch.matmul(d_scores, k_keys)
            d_k[..., :key_end, :] += torch.matmul(d_scores.mT, q_block)
            # dV += (P ∘ Z / (1 − p))ᵀ dO
            d_v[..., :key_end, :] += torch.matmul(probs.mul_(keep).mT, g_block)
        return d_q, d_k, d_v, None, None, None, None, None


def block_attention(  # noqa: PLR0913 - scaled_dot_product_attention's operands
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    scale: float | None = None,
    draws: KeepDraws | None = None,
) -> Tensor:
    """``softmax(scale · q kᵀ + mask)`` with dropout ``0 < dropout_p < 1`` on the weights,
    times ``v``, on CPU tensors of fp32 or fp64 (see the module's note). ``mask`` (boolean,
    True where a query may attend, broadcast to ``[..., Lq, Lk]``) must leave every query a
    key; ``is_causal``: query ``i`` (the last ``Lq`` of ``Lk``) sees keys up to its own.
    ``draws``: where the mask's uniform draws come from (tests pass their own)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    if mask is not None:
        mask = mask.expand(mask.shape[:-2] + (q.shape[-2], k.shape[-2]))
    draws = KeepDraws() if draws is None else draws
    operands = (t.contiguous() for t in (q, k, v))
    return _BlockAttention.apply(*operands, mask, is_causal, dropout_p, scale, draws)
