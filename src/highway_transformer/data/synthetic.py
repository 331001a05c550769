"""Synthetic memory tasks of the TCN suite (Bai et al. 2018), generated on the fly.

Both generators draw from a ``torch.Generator``, so a seeded generator gives the same
batches on every run.

Copy memory (Hochreiter & Schmidhuber 1997; layout of the TCN repository,
``TCN/copy_memory/utils.py``), with ``L = copy_len``, ``T = delay + 2 * L``:

* inputs: ``L`` random symbols in ``1..n_symbols``, then ``delay - 1`` blanks (0), then the
  delimiter ``n_symbols + 1`` (9 by default) at positions ``T - L - 1 .. T - 1``: the first
  one signals "recall now" and the ``L`` after it fill the steps where the answer is due;
* targets: blanks (0) for the first ``T - L`` steps, then the ``L`` symbols to copy.

The vocabulary has ``n_symbols + 2`` entries (blank, symbols, delimiter); a model that only
predicts blanks scores ``L * ln(n_symbols) / T`` cross-entropy (the TCN paper's baseline).

Adding problem (Hochreiter & Schmidhuber 1997; Le et al. 2015): channel 0 holds values
uniform in [0, 1), channel 1 marks two of them, one in each half of the sequence; the target
is the sum of the two marked values. (The TCN code draws the two positions anywhere; this
follows the original each-half variant.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ConfigError


def copy_memory_batch(
    batch_size: int,
    delay: int,
    n_symbols: int = 8,
    copy_len: int = 10,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """One copy-memory batch: ``(inputs [B, T], targets [B, T])`` int64, ``T = delay + 2L``."""
    if batch_size < 1 or delay < 1 or copy_len < 1 or n_symbols < 1:
        raise ConfigError(
            f"copy memory needs batch_size, delay, copy_len and n_symbols >= 1, got "
            f"{batch_size}, {delay}, {copy_len}, {n_symbols}"
        )
    total = delay + 2 * copy_len
    symbols = torch.randint(
        1, n_symbols + 1, (batch_size, copy_len), generator=generator, dtype=torch.int64
    )
    inputs = torch.zeros(batch_size, total, dtype=torch.int64)
    inputs[:, :copy_len] = symbols
    inputs[:, total - copy_len - 1 :] = n_symbols + 1
    targets = torch.zeros(batch_size, total, dtype=torch.int64)
    targets[:, total - copy_len :] = symbols
    return inputs, targets


def adding_problem_batch(
    batch_size: int, length: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """One adding-problem batch: ``(inputs [B, T, 2] float32, targets [B] float32)``."""
    if batch_size < 1 or length < 2:
        raise ConfigError(
            f"the adding problem needs batch_size >= 1 and length >= 2, got {batch_size}, {length}"
        )
    values = torch.rand(batch_size, length, generator=generator)
    half = length // 2
    first = torch.randint(0, half, (batch_size,), generator=generator)
    second = torch.randint(half, length, (batch_size,), generator=generator)
    markers = torch.zeros(batch_size, length)
    rows = torch.arange(batch_size)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    targets = values[rows, first] + values[rows, second]
    return torch.stack((values, markers), dim=-1), targets
