"""Gradient accumulation: ``train.accumulate`` micro-batches make one optimizer step.

The gradient is that of the mean loss over every counted item of the step, on every rank and
micro-batch, so ``K`` micro-batches of ``B`` rows equal one batch of ``K * B`` rows and ``N``
processes equal one. Only the last micro-batch synchronises gradients across ranks (DDP's
``no_sync`` or FSDP's ``set_requires_gradient_sync(False)`` on the others, chosen by the
strategy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

from torch import Tensor, nn

from ..runtime.world import World

#: A micro-batch's forward pass: ``(summed loss, number of items it sums over)``.
MicroBatch = Callable[[], tuple[Tensor, int]]


def accumulate_gradients(
    model: nn.Module,
    world: World,
    micro_batches: Sequence[MicroBatch],
    backward: Callable[[Tensor], None] = Tensor.backward,
    check: Callable[[float], None] = lambda mean: None,
    sync_off: Callable[[], AbstractContextManager[None]] = nullcontext,
    stop_asked: Callable[[], bool] = lambda: False,
) -> tuple[float, int, bool]:
    """Forward and ``backward`` every micro-batch; return the step's global mean and count,
    and whether any rank was asked to stop.

    ``check`` sees each micro-batch's mean loss before its backward (the divergence stop);
    ``sync_off`` wraps every micro-batch but the last (no gradient communication);
    ``stop_asked()`` (this rank's stop request, read then) rides on the step's closing
    all-reduce, so every rank learns of any rank's request at the same step without a
    collective of its own.

    Each backward divides its sum by one ``norm`` shared by all ranks (DDP averages ranks
    with equal weight); the gradients are then rescaled by ``size * norm / total count``,
    which is exactly 1 whenever counts are equal (LM rows), so one process with one
    micro-batch runs ``sum / count`` as before.
    """
    last = len(micro_batches) - 1
    norm, local_sum, local_count = 1.0, 0.0, 0
    for k, forward in enumerate(micro_batches):
        with sync_off() if k < last else nullcontext():
            total, count = forward()
            value = float(total.detach())
            check(value / max(count, 1))
            if k == 0:  # a shared scale keeps the backward near a mean's size
                norm = world.all_reduce_sum([count])[0] / world.size * len(micro_batches)
            with world.guard():  # DDP all-reduces inside the last backward
                backward(total / norm)
        local_sum += value
        local_count += count
    total_sum, n, stops = world.all_reduce_sum([local_sum, local_count, float(stop_asked())])
    scale = world.size * norm / max(n, 1.0)
    if scale != 1.0:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(scale)
    return total_sum / max(n, 1.0), int(n), stops > 0
