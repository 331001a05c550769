"""Dropout (Srivastava et al. 2014) with a faster mask on the CPU.

Same distribution as :class:`torch.nn.Dropout`: each element is kept with probability
``1 - p`` and scaled by ``1 / (1 - p)`` in training; the identity in evaluation. On the CPU
torch draws the mask with ``bernoulli_``, about twice as slow as a uniform draw and a
comparison; at the T-L3 size (ten dropouts per step) that was a fifth of a training step.
The uniform draws themselves come from numpy's SFC64 generator, about twice as fast as
torch's Mersenne Twister, seeded by one draw of torch's global generator: ``torch.manual_seed``
repeats a run, and the RNG state a checkpoint stores resumes it. Elsewhere (CUDA) torch's
fused kernel is already fast and keeps a one-byte mask, so it is used as is.

Under ``torch.compile`` (:func:`torch.compiler.is_compiling`) every mask is torch's own
(``F.dropout``, ``torch.rand``), whatever the device: a numpy call cannot be traced, and would
split the compiled graph in two at every dropout. The distribution is the same; the random
stream is not, so a compiled CPU run draws other masks than an eager one from the same seed
(the CUDA masks are torch's in both).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: The profiler label of a CPU mask draw (``benchmarks/bench_vs_xtransformers.py --profile``).
DRAW_LABEL = "highway::dropout_draw"


class Dropout(nn.Dropout):
    """:class:`torch.nn.Dropout` whose CPU training mask is ``(U[0, 1) >= p) / (1 - p)``."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu" or self.p == 1.0 or self.inplace or torch.compiler.is_compiling():
            return super().forward(x)
        return dropout(x, self.p)


def dropout(x: Tensor, p: float) -> Tensor:
    """Training-mode dropout of ``x`` (``0 <= p < 1``): :class:`Dropout`'s mask on the CPU,
    :func:`torch.nn.functional.dropout` elsewhere and under ``torch.compile``."""
    if p == 0.0:
        return x
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        return F.dropout(x, p)
    return x * keep_draw(x.shape, p).mul_(1.0 / (1.0 - p)).to(x.dtype)


class KeepDraws:
    """A stream of uniform draws for the masks of one operation made piece by piece (the
    blocks of :mod:`.attention_dropout`): numpy's SFC64 generator seeded by one draw of
    torch's global generator, as :func:`keep_draw`, so seeded runs repeat."""

    def __init__(self) -> None:
        seed = int(torch.randint(0, 1 << 62, (1,)))
        self._generator = np.random.Generator(np.random.SFC64(seed))

    def uniform(self, shape: tuple[int, ...]) -> Tensor:
        """``U[0, 1)`` float32 of ``shape``: the stream's next ``prod(shape)`` draws."""
        draws = torch.empty(shape, dtype=torch.float32)
        with torch.profiler.record_function(DRAW_LABEL):  # numpy's time, named in profiles
            self._generator.random(out=draws.numpy().reshape(-1), dtype=np.float32)
        return draws


def keep_draw(shape: tuple[int, ...], p: float, device: torch.device | None = None) -> Tensor:
    """1.0 where an element is kept (``U[0, 1) >= p``), else 0.0, float32: the draw of every
    dropout mask here (:class:`Dropout`, the relative-attention core).

    On the CPU one float32 per element (24 random bits, as ``torch.rand``) from numpy's SFC64
    generator, seeded by one draw of torch's global generator, so seeded runs repeat; on
    other devices, and under ``torch.compile``, ``torch.rand``.
    """
    if torch.compiler.is_compiling() or (device is not None and torch.device(device).type != "cpu"):
        return torch.rand(shape, dtype=torch.float32, device=device).ge_(p)
    return KeepDraws().uniform(shape).ge_(p)
