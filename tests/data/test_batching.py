"""LM batching (``data/batching.py``): evaluation windows count every target once, window bounds
tile the positions, training rows and their one-line errors."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from highway_transformer.data.batching import (
    IGNORE,
    eval_rows,
    train_rows,
    window_bounds,
    windows,
)
from highway_transformer.errors import DataError


@pytest.mark.parametrize(
    ("length", "batch", "seq_len", "context"),
    [
        (2, 4, 5, 0),  # a single target
        (17, 1, 5, 0),
        (33, 4, 8, 0),  # ragged last row
        (33, 4, 8, 3),  # ragged tail and context
        (50, 3, 6, 5),  # context = seq_len - 1
        (101, 7, 9, 4),
        (64, 5, 100, 10),  # windows longer than the rows
        (9, 16, 4, 2),  # more rows asked than targets
    ],
)
def test_eval_windows_count_every_target_once(
    length: int, batch: int, seq_len: int, context: int
) -> None:
    ids = torch.arange(1000, 1000 + length)  # distinct ids: each names its own position
    inputs, targets = eval_rows(ids, batch)
    counted: list[int] = []
    for window in windows(inputs, targets, seq_len, context):
        assert window.inputs.shape == window.targets.shape
        assert window.inputs.shape[1] <= seq_len
        y = window.targets[:, window.loss_start :]
        x = window.inputs[:, window.loss_start :]
        valid = y != IGNORE
        counted.extend(y[valid].tolist())
        # each counted target is predicted from its own predecessor in the stream
        assert torch.equal(x[valid], y[valid] - 1)
    assert Counter(counted) == Counter(ids[1:].tolist())
    assert sorted(counted) == ids[1:].tolist()


def test_eval_rows_layout() -> None:
    ids = torch.arange(11)
    inputs, targets = eval_rows(ids, 3)
    assert inputs.shape == targets.shape == (3, 4)  # 10 targets in 3 rows of 4, 2 padded
    assert targets[0].tolist() == [1, 2, 3, 4]
    assert targets[2].tolist() == [9, 10, IGNORE, IGNORE]
    assert inputs[1].tolist() == [4, 5, 6, 7]
    with pytest.raises(DataError, match="at least 2 tokens"):
        eval_rows(torch.arange(1), 4)


def test_window_bounds() -> None:
    assert window_bounds(10, 4, 1) == [(0, 4, 0), (3, 7, 1), (6, 10, 1)]
    assert window_bounds(9, 4, 1) == [(0, 4, 0), (3, 7, 1), (5, 9, 2)]  # ragged tail
    assert window_bounds(8, 4, 0) == [(0, 4, 0), (4, 8, 0)]
    assert window_bounds(3, 8, 2) == [(0, 3, 0)]
    # with memory (XL) the ragged last window is shorter instead of reaching back
    assert window_bounds(9, 4, 0, memory=True) == [(0, 4, 0), (4, 8, 0), (8, 9, 0)]
    assert window_bounds(9, 4, 1, memory=True) == [(0, 4, 0), (3, 7, 1), (6, 9, 1)]
    assert window_bounds(10, 4, 1, memory=True) == window_bounds(10, 4, 1)  # no ragged tail
    bounds = window_bounds(400, 400 // 2, 80)
    assert bounds[0] == (0, 200, 0)  # the first window counts all its positions
    assert all(loss_start == 80 for _, _, loss_start in bounds[1:-1])
    for context in (-1, 4):
        with pytest.raises(DataError, match="context"):
            window_bounds(10, 4, context)


@pytest.mark.parametrize("memory", [False, True])
def test_window_bounds_tile_the_positions(memory: bool) -> None:
    for length, seq_len, context in [(37, 6, 2), (100, 10, 9), (5, 5, 0), (23, 4, 0)]:
        counted = []
        for start, end, loss_start in window_bounds(length, seq_len, context, memory):
            assert end - start <= seq_len
            assert not memory or loss_start <= context  # never history the memory holds
            counted.extend(range(start + loss_start, end))
        assert counted == list(range(length))


def test_train_rows() -> None:
    ids = torch.arange(23)
    inputs, targets = train_rows(ids, 4, 3)
    assert inputs.shape == targets.shape == (4, 5)
    assert torch.equal(targets, inputs + 1)
    assert inputs[1, 0].item() == 5  # contiguous rows, remainder dropped


@pytest.mark.parametrize(("n", "batch", "seq_len"), [(5, 4, 8), (1, 1, 1), (8, 4, 4)])
def test_train_rows_too_short(n: int, batch: int, seq_len: int) -> None:
    with pytest.raises(DataError, match="too few"):
        train_rows(torch.arange(n), batch, seq_len)
