"""LM batching (``data/batching.py``): evaluation windows count every target once (or, in the
reference layout, those Transformer-XL's iterator scores), window bounds tile the positions,
training rows and their one-line errors."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from highway_transformer.data.batching import (
    EVAL_LAYOUTS,
    IGNORE,
    TensorTokens,
    eval_rows,
    reference_eval_rows,
    row_layout,
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


def lm_ordered_iterator(data: torch.Tensor, bsz: int, bptt: int):
    """Transformer-XL's ``LMOrderedIterator`` (``pytorch/data_utils.py``, ``ext_len`` 0)
    transcribed: ``(data, target)`` of each step, ``[seq_len, bsz]``."""
    n_step = data.size(0) // bsz
    data = data.narrow(0, 0, n_step * bsz)
    data = data.view(bsz, -1).t().contiguous()
    for i in range(0, data.size(0) - 1, bptt):
        seq_len = min(bptt, data.size(0) - 1 - i)
        yield data[i : i + seq_len], data[i + 1 : i + 1 + seq_len]


@pytest.mark.parametrize(
    ("length", "batch", "seq_len"),
    [(2, 1, 5), (17, 1, 5), (33, 4, 8), (39, 4, 8), (101, 7, 9), (64, 5, 100), (8, 4, 3)],
)
def test_reference_layout_is_the_xl_iterator(length: int, batch: int, seq_len: int) -> None:
    ids = torch.arange(1000, 1000 + length)
    inputs, targets = reference_eval_rows(ids, batch)
    ours = list(windows(inputs, targets, seq_len, 0, memory=True))
    theirs = list(lm_ordered_iterator(ids, batch, seq_len))
    assert len(ours) == len(theirs)
    for window, (data, target) in zip(ours, theirs, strict=True):
        assert window.loss_start == 0
        assert torch.equal(window.inputs, data.t()) and torch.equal(window.targets, target.t())
    scored = [t for _, target in theirs for t in target.flatten().tolist()]
    n_step = length // batch
    assert len(scored) == len(set(scored)) == batch * (n_step - 1)
    unscored = set(ids[1:].tolist()) - set(scored)
    # each row's first token and the remainder: at most 2B - 2 of the length - 1 targets
    assert len(unscored) == length - 1 - batch * (n_step - 1) <= 2 * batch - 2
    assert unscored == {1000 + r * n_step for r in range(1, batch)} | set(
        range(1000 + batch * n_step, 1000 + length)
    )


def test_every_layout_is_the_default_and_scores_every_target() -> None:
    assert list(EVAL_LAYOUTS) == ["every", "reference"]
    ids = torch.arange(1000, 1039)
    inputs, targets = EVAL_LAYOUTS["every"](ids, 4)
    scored = [y for w in windows(inputs, targets, 8, 0, memory=True) for y in w.targets.flatten()]
    assert sorted(int(y) for y in scored if y != IGNORE) == ids[1:].tolist()
    with pytest.raises(DataError, match="at least 2 tokens per row"):
        reference_eval_rows(torch.arange(7), 4)


def test_evaluation_windows_are_made_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list of every window's bounds grows with the text (64 MiB for 1 GB scored in 16 rows
    of 128): evaluation takes them one at a time."""
    import tracemalloc

    from highway_transformer.data import batching

    columns = 10_000_000
    tracemalloc.start()
    count = sum(1 for _ in batching.iter_window_bounds(columns, 128, 0))
    iterated = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == len(window_bounds(columns, 128, 0)) == 78_125
    assert iterated < 100_000  # bytes: none kept (a list of them holds ~10 MB)

    def listed(*args: object, **kwargs: object) -> None:
        raise AssertionError("evaluation built the list of every window")

    monkeypatch.setattr(batching, "window_bounds", listed)
    x = torch.arange(2 * 50).reshape(2, 50)
    assert len(list(batching.windows(x, x, 8, 2))) == 8
    layout = row_layout("every", 100, 2)
    assert len(list(layout.windows(TensorTokens(torch.arange(100)), slice(None), 8, 2))) == 8


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


@pytest.mark.parametrize("name", list(EVAL_LAYOUTS))
@pytest.mark.parametrize(
    ("length", "batch", "seq_len", "context"),
    [(2, 4, 5, 0), (10, 4, 3, 1), (33, 4, 8, 3), (39, 4, 8, 0), (50, 3, 6, 5), (64, 5, 100, 10),
     (101, 7, 9, 4), (9, 16, 4, 2)],
)  # fmt: skip
@pytest.mark.parametrize("memory", [False, True])
def test_row_layout_reads_the_windows_of_the_materialised_rows(
    name: str, length: int, batch: int, seq_len: int, context: int, memory: bool
) -> None:
    """Evaluation reads windows from the stream (:class:`RowLayout`): the same windows, padding
    included, as the rows of :data:`EVAL_LAYOUTS` materialised, for every share of the rows."""
    ids = torch.arange(1000, 1000 + length).to(torch.int32)
    try:
        inputs, targets = EVAL_LAYOUTS[name](ids, batch)
    except DataError:
        with pytest.raises(DataError):
            row_layout(name, length, batch)
        return
    layout = row_layout(name, length, batch)
    tokens = TensorTokens(ids)
    for rows in (slice(None), slice(0, 1), slice(1, layout.rows)):
        expected = list(windows(inputs[rows], targets[rows], seq_len, context, memory))
        for span in (1, 7, 1 << 14):  # columns read at a time: refills between windows
            ours = list(layout.windows(tokens, rows, seq_len, context, memory, span))
            assert len(ours) == len(expected)
            for a, b in zip(ours, expected, strict=True):
                assert (a.loss_start, a.index) == (b.loss_start, b.index)
                assert a.inputs.dtype == b.inputs.dtype == torch.long
                assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
        assert layout.targets(rows) == int((targets[rows] != IGNORE).sum())
