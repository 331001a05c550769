"""Gradient accumulation: ``train.accumulate`` micro-batches make one optimizer step.

The gradient is that of the mean loss over every counted target of the step, on every rank
and micro-batch, so ``K`` micro-batches of ``B`` rows equal one batch of ``K * B`` rows and
``N`` processes equal one. Under DistributedDataParallel only the last micro-batch
all-reduces gradients (``no_sync`` on the others).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext

from torch import Tensor, nn

from .distributed import World

#: A micro-batch's forward pass: ``(mean loss, number of counted targets)``.
MicroBatch = Callable[[], tuple[Tensor, int]]


def accumulate_gradients(
    model: nn.Module, world: World, micro_batches: Sequence[MicroBatch]
) -> tuple[float, int]:
    """Forward and backward every micro-batch; return the step's global mean loss and count.

    Each micro-batch's backward weighs its mean by ``count / norm`` with one ``norm`` shared
    by all ranks (DDP averages ranks with equal weight); the gradients are then rescaled by
    ``size * norm / total count``, which is exactly 1 when counts are equal (LM rows).
    """
    last = len(micro_batches) - 1
    norm, local_sum, local_count = 1.0, 0.0, 0
    for k, forward in enumerate(micro_batches):
        with model.no_sync() if k < last and hasattr(model, "no_sync") else nullcontext():
            mean, count = forward()
            if k == 0:  # a shared scale keeps the summed loss near a mean's size
                norm = world.all_reduce_sum([count])[0] / world.size * len(micro_batches)
            (mean * (count / norm)).backward()
        local_sum += float(mean.detach()) * count
        local_count += count
    total, n = world.all_reduce_sum([local_sum, local_count])
    scale = world.size * norm / max(n, 1.0)
    if scale != 1.0:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(scale)
    return total / max(n, 1.0), int(n)
