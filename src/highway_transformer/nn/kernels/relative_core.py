"""The core of Transformer-XL relative attention with a hand-written backward.

``softmax(scale · (AC + shift(BD)) masked) · V`` for every head, where ``AC = (q + u)ᵀ k``
and ``BD = (q + v)ᵀ W_kR R`` over the distances ``K-1 … 0`` (the readable form:
:class:`..relative.RelativeMultiHeadAttention`'s forward). Written with autograd, the shift,
the scaling, the mask and the attention product each make and read another ``[B, H, L, K]``
tensor forward and backward. Here:

* the zero column of the reference code's ``_rel_shift`` comes from a zero row prepended
  to the position keys, so one batched product writes the padded ``BD`` rows and the shift
  is a view (:func:`shifted_view`);
* that view is copied once, scaled and masked (a ``-inf`` bias) in the same pass, and
  ``baddbmm_`` accumulates the scaled ``AC`` into the copy in place;
* the backward keeps only the probabilities (and the dropout mask): the softmax backward
  is one fused pass, the mask needs none (masked probabilities are 0, so are their
  gradients), the scale is applied to the small ``[·, dh]`` products and the shift is undone
  by one copy into the padded layout.

More zero rows give the same shift: with ``p`` of them the padded rows are ``W = K+p``
wide and the shifted row ``i`` starts ``W-1`` elements after row ``i-1`` (a strided view). On
a GPU ``p`` makes ``W`` a multiple of 8 (:func:`zero_rows`): unaligned rows (``K+1 = 1025``
bf16 elements) send the three products that touch them to slow unaligned kernels. A CPU
keeps ``p = 1``.

Layout: head-major, ``H·B`` matrices (head ``h`` of row ``b`` is matrix ``h·B + b``), so the
shifted ``BD`` of ``[H, B·L, W]`` is a ``[H·B, L, K]`` view. Oracle: the same formula by
autograd, :func:`.reference.rel_attention` (the code's shift: :func:`.reference.rel_shift`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..dropout import keep_draw

_LOW_PRECISION = (torch.float16, torch.bfloat16)


#: Row width multiple of the padded BD products on a GPU: 16 bytes of fp16/bf16.
GPU_ROW_ALIGN = 8


def zero_rows(k_len: int, device: torch.device) -> int:
    """Zero rows before the ``K`` position keys: 1 (the reference ``_rel_shift``'s padding
    column), or on a GPU as many as make the ``BD`` rows a multiple of :data:`GPU_ROW_ALIGN`
    wide (aligned products; the result is the same)."""
    align = GPU_ROW_ALIGN if device.type == "cuda" else 1
    return -(-(k_len + 1) // align) * align - k_len


def shifted_view(bd: Tensor, bsz: int, q_len: int, k_len: int) -> Tensor:
    """``[H·B, L, K]``: row ``i`` of each ``[L, W]`` block of ``bd [H, B·L, W]`` shifted left
    by ``L-1-i`` past the ``p = W-K`` zero columns (the reference ``_rel_shift``; columns
    ``< p`` must hold zeros). Read flat, entry ``(i, j)`` is ``i·(W-1) + j + L-1+p`` from
    the block's start: a strided view, no copy. One query (``L = 1``, ``bd [H, B, K]``
    unpadded) needs no shift."""
    n_h, _, width = bd.shape
    if q_len == 1:
        return bd.view(n_h * bsz, 1, k_len)
    # The strides below assume a contiguous bd; copying one here would also drop what
    # _unshift writes through this view, so refuse instead.
    if not bd.is_contiguous():
        raise ValueError("shifted_view needs a contiguous bd")
    # as_strided without an offset starts where its input does: at the first entry read,
    # a flat view's (reading bd.storage_offset() instead would split a torch.compile graph)
    start = q_len - 1 + width - k_len
    return bd.view(-1)[start:].as_strided((n_h * bsz, q_len, k_len), (q_len * width, width - 1, 1))


def _dims(q_u: Tensor, q_v: Tensor, key: Tensor) -> tuple[int, int, int, int]:
    """``(H, B, L, K)`` of the operands' layouts."""
    n_h = q_v.shape[0]
    return n_h, q_u.shape[0] // n_h, q_u.shape[1], key.shape[1]


def _unshift(d_scores: Tensor, n_h: int, bsz: int, q_len: int, width: int) -> Tensor:
    """The gradient of :func:`shifted_view`: ``d_scores [H·B, L, K]`` laid back into the
    padded ``[H, B·L, W]`` rows, zero where the view reads nothing."""
    k_len = d_scores.shape[-1]
    if q_len == 1:
        return d_scores.reshape(n_h, bsz, k_len)
    if torch.compiler.is_compiling():  # a write through the strided view cannot be compiled
        return torch.as_strided_scatter(
            d_scores.new_zeros(n_h, bsz * q_len, width),
            d_scores,
            (n_h * bsz, q_len, k_len),
            (q_len * width, width - 1, 1),
            q_len - 1 + width - k_len,
        )
    if width == k_len + 1:  # the view reads all but the first L entries of each block
        padded = d_scores.new_empty(n_h, bsz * q_len, width)
        padded.view(n_h, bsz, q_len * width)[..., :q_len].zero_()
    else:  # and also skips p-1 entries between rows
        padded = d_scores.new_zeros(n_h, bsz * q_len, width)
    shifted_view(padded, bsz, q_len, k_len).copy_(d_scores)
    return padded


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
        n_h, bsz, q_len, _ = _dims(q_u, q_v, key)
        d_bd = _unshift(d_scores, n_h, bsz, q_len, r_rows.shape[1])
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
    ``value [H·B, K, dh]``, ``r_rows [H, K+p, dh]``: the position keys of the distances
    ``K-1 … 0`` after ``p >= 1`` zero rows (:func:`zero_rows`; ``[H, K, dh]`` without them
    when ``L = 1``), ``mask [L, K]`` (True: not attended; None: nothing masked), ``dropout``
    on the attention weights (the caller passes 0 outside training). All tensors share one
    dtype and device.
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
