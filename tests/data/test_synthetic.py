"""Copy-memory and adding-problem generators (TCN suite)."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.data.synthetic import adding_problem_batch, copy_memory_batch
from highway_transformer.errors import ConfigError


def test_copy_memory_layout() -> None:
    gen = torch.Generator().manual_seed(0)
    delay, copy_len = 20, 10
    x, y = copy_memory_batch(64, delay, copy_len=copy_len, generator=gen)
    total = delay + 2 * copy_len
    assert x.shape == y.shape == (64, total)
    assert x.dtype == y.dtype == torch.int64
    symbols = x[:, :copy_len]
    assert int(symbols.min()) >= 1 and int(symbols.max()) <= 8
    assert set(symbols.unique().tolist()) == set(range(1, 9))
    assert (x[:, copy_len : total - copy_len - 1] == 0).all()
    assert (x[:, total - copy_len - 1 :] == 9).all()
    assert (y[:, : total - copy_len] == 0).all()
    assert torch.equal(y[:, total - copy_len :], symbols)


def test_copy_memory_other_alphabet_and_seeds() -> None:
    x, y = copy_memory_batch(
        8, 5, n_symbols=3, copy_len=4, generator=torch.Generator().manual_seed(1)
    )
    assert x.shape == (8, 13)
    assert int(x[:, :4].max()) <= 3 and (x[:, -5:] == 4).all()
    again = copy_memory_batch(
        8, 5, n_symbols=3, copy_len=4, generator=torch.Generator().manual_seed(1)
    )
    assert torch.equal(x, again[0]) and torch.equal(y, again[1])
    other = copy_memory_batch(
        8, 5, n_symbols=3, copy_len=4, generator=torch.Generator().manual_seed(2)
    )
    assert not torch.equal(x, other[0])
    with pytest.raises(ConfigError):
        copy_memory_batch(8, 0)


def test_adding_problem_markers_and_target() -> None:
    gen = torch.Generator().manual_seed(0)
    length = 50
    x, y = adding_problem_batch(128, length, generator=gen)
    assert x.shape == (128, length, 2) and y.shape == (128,)
    assert x.dtype == y.dtype == torch.float32
    values, markers = x[..., 0], x[..., 1]
    assert float(values.min()) >= 0.0 and float(values.max()) < 1.0
    assert set(markers.unique().tolist()) == {0.0, 1.0}
    half = length // 2
    assert (markers[:, :half].sum(1) == 1).all()
    assert (markers[:, half:].sum(1) == 1).all()
    assert torch.allclose(y, (values * markers).sum(1))


def test_adding_problem_seeded_and_odd_length() -> None:
    a = adding_problem_batch(16, 7, generator=torch.Generator().manual_seed(9))
    b = adding_problem_batch(16, 7, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert (a[0][:, :3, 1].sum(1) == 1).all() and (a[0][:, 3:, 1].sum(1) == 1).all()
    with pytest.raises(ConfigError):
        adding_problem_batch(4, 1)
