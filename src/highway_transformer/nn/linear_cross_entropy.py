"""The output layer and its cross-entropy in one pass, a block of rows at a time (CPU).

``sum_i -log softmax(x_i Wᵀ + b)[t_i]`` is what ``F.cross_entropy(F.linear(x, W, b), t,
reduction="sum")`` computes; for a word-level vocabulary that route writes the ``[N, V]``
logits, their log-softmax and its gradient (three tensors of ~50 MB for T-L3 on word PTB)
and reads each several times, which on a CPU costs about as much as the output layer's
matrix products themselves. Here the logits of ``ROWS_ELEMENTS / V`` rows at a time are
made into one buffer (the bias rides in the matrix product as one more column), and, when a
gradient is wanted, turned in place by one exponential pass into ``exp(logit - row max)``:
the softmax less the one-hot targets is never written out, its row sums scale the small
operands of that block's ``dx`` and ``dW`` products instead, and the one-hot part is a gather
and a scatter of rows. ``dx``, ``dW`` and ``db`` come at once, in the forward (no logits are
kept or recomputed). The backward scales them by the loss's gradient, a scalar: the function
returns the *sum* of the NLL only, which is what training reduces it to (``reduction="sum"``
or ``"mean"``). Same maths, other summation order: :func:`torch.nn.functional.cross_entropy`
on :func:`torch.nn.functional.linear` is the oracle (``tests/nn/test_linear_cross_entropy.py``);
``benchmarks/bench_linear_cross_entropy.py`` times both.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["IGNORE_INDEX", "ROWS_ELEMENTS", "linear_cross_entropy", "takes_row_blocks"]

#: Targets with this id count nothing (as ``F.cross_entropy``'s default).
IGNORE_INDEX = -100
#: Logits per block of rows: 4 M values (16 MB in fp32). Word PTB's output layer (V 10,000,
#: one thread) took the same time with blocks of 0.5-4 M at d 128 and the least with 4 M at
#: d 512 (0.8x of 1 M); the gain is fewer passes over the logits more than cache residency.
ROWS_ELEMENTS = 1 << 22
#: Below this vocabulary the logits are small and torch's route is as fast (measured in
#: ``benchmarks/bench_linear_cross_entropy.py``).
MIN_VOCAB = 1000


def takes_row_blocks(hidden: Tensor, vocab_size: int) -> bool:
    """Whether the output layer's summed NLL on ``hidden`` goes a block of rows at a time:
    fp32/fp64 on the CPU, a vocabulary of at least :data:`MIN_VOCAB`, outside autocast and
    ``torch.compile`` (which fuse their own way)."""
    return (
        hidden.device.type == "cpu"
        and hidden.dtype in (torch.float32, torch.float64)
        and vocab_size >= MIN_VOCAB
        and not torch.is_autocast_enabled("cpu")
        and not torch.compiler.is_compiling()
    )


def linear_cross_entropy(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor
) -> Tensor:
    """``F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction="sum",
    ignore_index=-100)`` for ``hidden [N, D]``, ``weight [V, D]``, ``targets [N]``, a block
    of rows at a time (see the module's note); a scalar in ``hidden``'s dtype."""
    return _LinearCrossEntropy.apply(hidden, weight, bias, targets.long())


def _block_rows(vocab_size: int) -> int:
    return max(1, ROWS_ELEMENTS // vocab_size)


def _block_nll(logits: Tensor, targets: Tensor, counted: Tensor) -> Tensor:
    """The summed NLL of one block's counted targets, the logits left as they are."""
    chosen = logits.gather(1, targets.clamp_min(0)[:, None]).squeeze(1)
    nll = torch.logsumexp(logits, dim=-1) - chosen
    return nll.masked_fill(~counted, 0.0).sum()


def _with_bias_column(hidden: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """``hidden`` and ``weight`` with the bias as one more column (and a column of ones):
    the matrix products then add the bias and make its gradient, with no pass of their own
    over the logits (``addmm`` copies the bias into every row of its output first)."""
    if bias is None:
        return hidden, weight
    ones = hidden.new_ones((hidden.shape[0], 1))
    return torch.cat([hidden, ones], dim=1), torch.cat([weight, bias[:, None]], dim=1)


def _block_nll_and_exps(
    logits: Tensor, targets: Tensor, counted: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The summed NLL of one block's counted targets; ``exp(logits - row max)``, made in
    place of the logits by one exponential pass; and each row's ``1 / sum`` of them (0 on
    ignored rows): the softmax is ``exps * inverse_mass``, left for the matrix products to
    scale, which costs them nothing."""
    chosen = logits.gather(1, targets.clamp_min(0)[:, None]).squeeze(1)
    peak = logits.amax(dim=-1, keepdim=True)
    exps = logits.sub_(peak).exp_()
    mass = exps.sum(dim=-1, keepdim=True)
    nll = (peak + mass.log()).squeeze(1) - chosen
    inverse_mass = mass.reciprocal_().masked_fill_(~counted[:, None], 0.0)
    return nll.masked_fill(~counted, 0.0).sum(), exps, inverse_mass


class _LinearCrossEntropy(torch.autograd.Function):
    """The gradient by the logits is ``softmax - onehot`` = ``exps / mass - onehot``; neither
    term is written out: ``d_hidden = (exps @ W) / mass - W[targets]`` and
    ``d_weight = expsᵀ @ (x / mass) - (x scattered to the targets' rows)``, so the only
    passes over a block's logits are the max, the exponential and the sum besides the
    three matrix products."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor
    ) -> Tensor:
        wants = ctx.needs_input_grad
        wants_weight = wants[1] or (bias is not None and wants[2])
        hidden_in, weight_in = _with_bias_column(hidden, weight, bias)
        d_hidden = torch.empty_like(hidden) if wants[0] else None  # every block writes its rows
        # The weight's gradient is made transposed, [D (+1 for the bias), V]: x_inᵀ @ exps
        # streams the contiguous exps as the product's right operand, 1.4-1.5x faster on one
        # CPU thread than expsᵀ @ x_in into [V, D] (word PTB's shapes); backward transposes
        # it once, in the pass that scales it.
        d_weight_t = weight_in.new_zeros(weight_in.shape[::-1]) if wants_weight else None
        rows = max(1, min(_block_rows(weight.shape[0]), hidden.shape[0]))
        buffer = hidden.new_empty((rows, weight.shape[0]))  # the logits of every block in turn
        total = hidden.new_zeros(())
        for start in range(0, hidden.shape[0], rows):
            x_in, t = hidden_in[start : start + rows], targets[start : start + rows]
            logits = torch.mm(x_in, weight_in.t(), out=buffer[: x_in.shape[0]])
            counted = t != IGNORE_INDEX
            if d_hidden is None and d_weight_t is None:
                total += _block_nll(logits, t, counted)
                continue
            nll, exps, inverse_mass = _block_nll_and_exps(logits, t, counted)
            total += nll
            picked = t.clamp_min(0)
            if d_hidden is not None:
                d_x = torch.mm(exps, weight, out=d_hidden[start : start + rows]).mul_(inverse_mass)
                d_x.sub_(weight[picked] * counted[:, None])
            if d_weight_t is not None:
                d_weight_t.addmm_((x_in * inverse_mass).t(), exps)
                d_weight_t.index_add_(1, picked[counted], x_in[counted].t(), alpha=-1)
        empty = hidden.new_empty(0)
        ctx.save_for_backward(*(g if g is not None else empty for g in (d_hidden, d_weight_t)))
        ctx.width = hidden.shape[1]
        ctx.has_bias = bias is not None
        return total

    @staticmethod
    def backward(ctx: Any, grad_total: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        d_hidden, d_weight_t = ctx.saved_tensors
        wants = ctx.needs_input_grad
        d_weight = None
        if wants[1]:  # [V, D] contiguous, as the weight: transposed and scaled in one pass
            d_weight = d_weight_t.new_empty((d_weight_t.shape[1], ctx.width))
            d_weight = torch.mul(d_weight_t[: ctx.width].t(), grad_total, out=d_weight)
        return (
            d_hidden * grad_total if wants[0] else None,
            d_weight,
            d_weight_t[ctx.width] * grad_total if ctx.has_bias and wants[2] else None,
            None,
        )
