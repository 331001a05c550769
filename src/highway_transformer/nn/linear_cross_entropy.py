"""The output layer and its cross-entropy in one pass, a block of rows at a time (CPU).

``sum_i -log softmax(x_i Wᵀ + b)[t_i]`` is what ``F.cross_entropy(F.linear(x, W, b), t,
reduction="sum")`` computes; for a word-level vocabulary that route writes the ``[N, V]``
logits, their log-softmax and its gradient (three tensors of ~50 MB for T-L3 on word PTB)
and reads each several times, which on a CPU costs about as much as the output layer's
matrix products themselves. Here the logits of ``ROWS_ELEMENTS / V`` rows at a time are
made, and, when a gradient is wanted, turned in place by one exponential pass into the loss
and the softmax, less the one-hot targets: that block's ``dx`` and its share of ``dW`` and
``db`` come at once, in the forward (no logits are kept or recomputed). The backward scales
them by the loss's gradient, a scalar: the function returns the *sum* of the NLL only,
which is what training reduces it to (``reduction="sum"`` or ``"mean"``). Same maths, other
summation order: :func:`torch.nn.functional.cross_entropy` on
:func:`torch.nn.functional.linear` is the oracle (``tests/nn/test_linear_cross_entropy.py``);
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


def _block_nll_and_grad(logits: Tensor, targets: Tensor, counted: Tensor) -> tuple[Tensor, Tensor]:
    """The summed NLL of one block's counted targets and its gradient by the logits
    (softmax less one-hot; 0 on ignored rows), made in place of the logits by one
    exponential pass."""
    picked = targets.clamp_min(0)[:, None]
    chosen = logits.gather(1, picked).squeeze(1)
    peak = logits.amax(dim=-1, keepdim=True)
    grad = logits.sub_(peak).exp_()
    mass = grad.sum(dim=-1, keepdim=True)
    nll = (peak + mass.log()).squeeze(1) - chosen
    grad.div_(mass)
    grad.scatter_add_(1, picked, torch.full_like(picked, -1, dtype=grad.dtype))
    if not bool(counted.all()):
        grad[~counted] = 0.0
    return nll.masked_fill(~counted, 0.0).sum(), grad


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, hidden: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor
    ) -> Tensor:
        wants = ctx.needs_input_grad
        d_hidden = torch.empty_like(hidden) if wants[0] else None  # every block writes its rows
        d_weight = torch.zeros_like(weight) if wants[1] else None
        d_bias = torch.zeros_like(bias) if bias is not None and wants[2] else None
        gradients = any(g is not None for g in (d_hidden, d_weight, d_bias))
        total = hidden.new_zeros(())
        rows = _block_rows(weight.shape[0])
        for start in range(0, hidden.shape[0], rows):
            x, t = hidden[start : start + rows], targets[start : start + rows]
            logits = x @ weight.t() if bias is None else torch.addmm(bias, x, weight.t())
            counted = t != IGNORE_INDEX
            if not gradients:
                total += _block_nll(logits, t, counted)
                continue
            nll, grad = _block_nll_and_grad(logits, t, counted)
            total += nll
            if d_hidden is not None:
                torch.mm(grad, weight, out=d_hidden[start : start + rows])
            if d_weight is not None:
                d_weight.addmm_(grad.t(), x)
            if d_bias is not None:
                d_bias += grad.sum(0)
        empty = hidden.new_empty(0)
        ctx.save_for_backward(
            *(g if g is not None else empty for g in (d_hidden, d_weight, d_bias))
        )
        ctx.has_bias = bias is not None
        return total

    @staticmethod
    def backward(ctx: Any, grad_total: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        d_hidden, d_weight, d_bias = ctx.saved_tensors
        wants = ctx.needs_input_grad
        return (
            d_hidden * grad_total if wants[0] else None,
            d_weight * grad_total if wants[1] else None,
            d_bias * grad_total if ctx.has_bias and wants[2] else None,
            None,
        )
