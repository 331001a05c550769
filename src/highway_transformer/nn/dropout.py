"""Dropout (Srivastava et al. 2014) with a faster mask on the CPU.

Same distribution as :class:`torch.nn.Dropout`: each element is kept with probability
``1 - p`` and scaled by ``1 / (1 - p)`` in training; the identity in evaluation. On the CPU
torch draws the mask with ``bernoulli_``, about twice as slow as a uniform draw and a
comparison; at the T-L3 size (ten dropouts per step) that was a fifth of a training step.
The uniform draws themselves come from numpy's SFC64 generator, about twice as fast as
torch's Mersenne Twister, seeded by one draw of torch's global generator: ``torch.manual_seed``
repeats a run, and the RNG state a checkpoint stores resumes it. The mask is the one of
numpy's float32 draws ``(r >> 8) / 2**24`` of its 32-bit words ``r`` compared with ``p``, taken
without making the floats: the words straight from the generator compared with the integer
threshold that comparison amounts to (:func:`keep_threshold`), about twice as fast and the
same mask bit for bit. Elsewhere (CUDA) torch's fused kernel is already fast and keeps a
one-byte mask, so it is used as is.

Under ``torch.compile`` (:func:`torch.compiler.is_compiling`) every mask is torch's own
(``F.dropout``, ``torch.rand``), whatever the device: a numpy call cannot be traced, and would
split the compiled graph in two at every dropout. The distribution is the same; the random
stream is not, so a compiled CPU run draws other masks than an eager one from the same seed
(the CUDA masks are torch's in both).
"""

from __future__ import annotations

import functools
import math

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
    """A stream of keep masks for the masks of one operation made piece by piece (the
    blocks of :mod:`.attention_dropout`): numpy's SFC64 generator seeded by one draw of
    torch's global generator, as :func:`keep_draw`, so seeded runs repeat."""

    def __init__(self) -> None:
        seed = int(torch.randint(0, 1 << 62, (1,)))
        self._bits = np.random.SFC64(seed)
        self._spare = np.empty(0, dtype=np.uint32)  # the unused half of a 64-bit output

    def words(self, count: int) -> np.ndarray:
        """The stream's next ``count`` 32-bit words, in the order numpy's float32 draws read
        them: the low then the high half of each 64-bit output, an odd count leaving the
        high half for the next call."""
        reused = min(count, self._spare.size)
        head, self._spare = self._spare[:reused], self._spare[reused:]
        needed = count - reused
        fresh = self._bits.random_raw((needed + 1) // 2).view(np.uint32)
        if needed % 2:
            self._spare = fresh[needed:].copy()
        return np.concatenate([head, fresh[:needed]]) if reused else fresh[:needed]

    def keep(self, shape: tuple[int, ...], p: float) -> Tensor:
        """float32 of ``shape``: 1.0 where the stream's next uniform draw ``U[0, 1)`` (24 bits,
        as ``torch.rand``) is at least ``p``, else 0.0. The mask is written over its own words
        (one allocation, not two: fresh pages cost more than the comparison)."""
        count = math.prod(shape)
        with torch.profiler.record_function(DRAW_LABEL):  # numpy's time, named in profiles
            words, threshold = self.words(count), keep_threshold(p)
            kept = words.view(np.float32)
            if threshold is None:  # p rounds to 1 in float32: the words are spent all the same
                kept[:] = 0.0
            else:
                np.greater_equal(words, threshold, out=kept, casting="unsafe")
        return torch.from_numpy(kept).view(shape)


@functools.lru_cache(maxsize=64)
def keep_threshold(p: float) -> np.uint32 | None:
    """The least 32-bit word ``r`` whose float32 draw ``(r >> 8) / 2**24`` is kept at ``p``
    (``>= p`` as torch compares a float32 tensor with ``p``), or None where no draw is. Found
    with torch's own comparison around ``p * 2**24``, so the mask is the one ``torch.rand``'s
    floats compared with ``p`` would give."""
    guess = min(max(math.ceil(p * (1 << 24)), 0), 1 << 24)
    counts = torch.arange(guess - 2, guess + 3, dtype=torch.float64).clamp_(0, (1 << 24) - 1)
    kept = (counts / (1 << 24)).to(torch.float32).ge(p)  # exact: multiples of 2**-24
    if not bool(kept.any()):
        return None
    return np.uint32(int(counts[kept].min()) << 8)


def keep_draw(shape: tuple[int, ...], p: float, device: torch.device | None = None) -> Tensor:
    """1.0 where an element is kept (``U[0, 1) >= p``), else 0.0, float32: the draw of every
    dropout mask here (:class:`Dropout`, the relative-attention core).

    On the CPU one 32-bit word per element from numpy's SFC64 generator (its top 24 bits
    decide, as a float32 draw of ``torch.rand``), seeded by one draw of torch's global
    generator, so seeded runs repeat; on other devices, and under ``torch.compile``,
    ``torch.rand``.
    """
    if torch.compiler.is_compiling() or (device is not None and torch.device(device).type != "cpu"):
        return torch.rand(shape, dtype=torch.float32, device=device).ge_(p)
    return KeepDraws().keep(shape, p)
