"""The core of Transformer-XL relative attention with a hand-written backward.

``softmax(scale · (AC + shift(BD)) masked) · V`` for every head, where ``AC = (q + u)ᵀ k``
and ``BD = (q + v)ᵀ W_kR R`` over the distances ``K-1 … 0`` (see :mod:`.relative`). Written
with autograd, the shift (pad, reshape, slice), the scaling, the mask and the attention
product each make and read another ``[B, H, L, K]`` tensor forward and backward; on a CPU
those passes took about as long as the matrix products (the L6-XL of the HT Table 5
analogue). Here:

* the zero column of the reference code's ``_rel_shift`` comes from a zero row prepended
  to the position keys, so one batched product writes the padded ``BD`` rows and the shift
  is a view (:func:`shifted_view`);
* that view is copied once, scaled and masked (a ``-inf`` bias) in the same pass, and
  ``baddbmm_`` accumulates the scaled ``AC`` into the copy in place;
* the backward keeps only the probabilities (and the dropout mask): the softmax backward
  is one fused pass, the mask needs none (masked probabilities are 0, so are their
  gradients), the scale is applied to the small ``[·, dh]`` products and the shift is undone
  by one copy into the padded layout.

Layout: head-major, ``H·B`` matrices (head ``h`` of row ``b`` is matrix ``h·B + b``), so the
shifted ``BD`` of ``[H, B·L, K+1]`` is a ``[H·B, L, K]`` view. A slow autograd composition of
the same formula is the oracle in ``tests/test_relative_attention.py``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .dropout import keep_draw

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def shifted_view(bd: Tensor, bsz: int, q_len: int, k_len: int) -> Tensor:
    """``[H·B, L, K]``: row ``i`` of each ``[L, K+1]`` block of ``bd [H, B·L, K+1]`` shifted
    left by ``L-1-i`` (the reference ``_rel_shift``; column 0 must hold zeros). Read flat,
    the padded rows minus their first ``L`` entries are the shifted rows: a view, no copy.
    One query (``L = 1``, ``bd [H, B, K]`` unpadded) needs no shift."""
    n_h = bd.shape[0]
    if q_len == 1:
        return bd.view(n_h * bsz, 1, k_len)
    flat = bd.view(n_h, bsz, q_len * (k_len + 1))
    return flat[..., q_len:].view(n_h * bsz, q_len, k_len)


def _dims(q_u: Tensor, q_v: Tensor, key: Tensor) -> tuple[int, int, int, int]:
    """``(H, B, L, K)`` of the operands' layouts."""
    n_h = q_v.shape[0]
    return n_h, q_u.shape[0] // n_h, q_u.shape[1], key.shape[1]


def _unshift(d_scores: Tensor, n_h: int, bsz: int, q_len: int, k_len: int) -> Tensor:
    """The gradient of :func:`shifted_view`: ``d_scores [H·B, L, K]`` laid back into the
    padded ``[H, B·L, K+1]`` rows, zero where the view reads nothing."""
    if q_len == 1:
        return d_scores.reshape(n_h, bsz, k_len)
    padded = d_scores.new_empty(n_h, bsz, q_len * (k_len + 1))
    padded[..., :q_len].zero_()
    padded[..., q_len:].view(n_h * bsz, q_len, k_len).copy_(d_scores)
    return padded.view(n_h, bsz * q_len, k_len + 1)


def _probabilities(
    q_u: Tensor, q_v: Tensor, key: Tensor, r_rows: Tensor, mask: Tensor | None, scale: float
) -> Tensor:
    """``softmax(scale · (AC + shift(BD)))`` over the keys, masked: ``[H·B, L, K]``."""
    _, bsz, q_len, k_len = _dims(q_u, q_v, key)
    bd = shifted_view(torch.bmm(q_v, r_rows.transpose(1, 2)), bsz, q_len, k_len)
    low_precision = bd.dtype in _LOW_PRECISION
    # The strided view is copied once, scaled (and masked) in that pass; the content product
    # then accumulates in place (baddbmm would copy the view and scale it in two more passes).
    if mask is not None and not low_precision:
        # The mask as a -inf bias: a broadcast masked_fill_ cost about as much as the softmax.
        scores = torch.add(bd.new_zeros(mask.shape).masked_fill_(mask, -math.inf), bd, alpha=scale)
    else:
        scores = bd * scale
    scores.baddbmm_(q_u, key.transpose(1, 2), alpha=scale)
    if mask is not None and low_precision:  # fp16/bf16: an overflowed +inf must not meet -inf
        scores.masked_fill_(mask, float("-inf"))
    if low_precision:  # the exponentials in fp32
        return torch.softmax(scores, -1, dtype=torch.float32).to(scores.dtype)
    return torch.softmax(scores, -1)


class _RelativeAttention(torch.autograd.Function):
    @staticmethod
    def forward(  # noqa: PLR0913 - the formula's operands
        ctx: torch.autograd.function.FunctionCtx,
        q_u: Tensor,
        q_v: Tensor,
        key: Tensor,
        value: Tensor,
        r_rows: Tensor,
        mask: Tensor | None,
        keep: Tensor | None,
        scale: float,
    ) -> Tensor:
        probs = _probabilities(q_u, q_v, key, r_rows, mask, scale)
        weights = probs if keep is None else probs * keep
        ctx.save_for_backward(q_u, q_v, key, value, r_rows, probs, keep)
        ctx.scale = scale
        return torch.bmm(weights, value)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, d_out: Tensor) -> tuple:
        q_u, q_v, key, value, r_rows, probs, keep = ctx.saved_tensors
        scale = ctx.scale
        weights = probs if keep is None else probs * keep
        d_value = torch.bmm(weights.transpose(1, 2), d_out)
        d_probs = torch.bmm(d_out, value.transpose(1, 2))
        if keep is not None:
            d_probs.mul_(keep)
        d_scores = torch.ops.aten._softmax_backward_data(d_probs, probs, -1, probs.dtype)
        d_q_u = torch.bmm(d_scores, key).mul_(scale)
        d_key = torch.bmm(d_scores.transpose(1, 2), q_u).mul_(scale)
        d_bd = _unshift(d_scores, *_dims(q_u, q_v, key))
        d_q_v = torch.bmm(d_bd, r_rows).mul_(scale)
        d_r_rows = torch.bmm(d_bd.transpose(1, 2), q_v).mul_(scale)
        return d_q_u, d_q_v, d_key, d_value, d_r_rows, None, None, None


def relative_attention(
    q_u: Tensor,
    q_v: Tensor,
    key: Tensor,
    value: Tensor,
    r_rows: Tensor,
    mask: Tensor | None,
    scale: float,
    dropout: float = 0.0,
) -> Tensor:
    """Attention output ``[H·B, L, dh]`` of one relative-attention layer.

    ``q_u [H·B, L, dh]`` (queries + u), ``q_v [H, B·L, dh]`` (queries + v), ``key`` /
    ``value [H·B, K, dh]``, ``r_rows [H, K+1, dh]``: the position keys of the distances
    ``K-1 … 0`` after a zero row (``[H, K, dh]`` without it when ``L = 1``), ``mask [L, K]``
    (True: not attended; None: nothing masked), ``dropout`` on the attention weights (the
    caller passes 0 outside training). All tensors share one dtype and device.
    """
    keep = None
    if dropout > 0.0:
        shape = (q_u.shape[0], q_u.shape[1], key.shape[1])
        keep = keep_draw(shape, dropout, q_u.device).to(q_u.dtype).div_(1.0 - dropout)
    operands = (q_u, q_v, key, value, r_rows)
    with torch.autocast(q_u.device.type, enabled=False):
        if torch.is_grad_enabled() and any(t.requires_grad for t in operands):
            return _RelativeAttention.apply(*operands, mask, keep, scale)
        # No gradient wanted (evaluation, decoding): the same forward without the autograd
        # node, whose Python overhead shows in one-token decoding steps.
        probs = _probabilities(q_u, q_v, key, r_rows, mask, scale)
        return torch.bmm(probs if keep is None else probs * keep, value)
