"""Language-model batching: contiguous streams, windows with an "effective history".

A split is laid out as ``B`` contiguous rows (``inputs[b, t]`` predicts ``targets[b, t]``, the
next token). Windows of ``seq_len`` slide along the rows with stride ``seq_len - context``;
the first ``context`` positions of each window after the first are history only, so every
target is counted exactly once (HT A.1: sequence length 400, loss on the last 320).

Evaluation has two layouts (:data:`EVAL_LAYOUTS`, ``data.eval_layout``): ``every`` scores
every target of the split once; ``reference`` is Transformer-XL's ``LMOrderedIterator``, which
drops the remainder of ``len // B`` and never scores the first token of each of its ``B`` rows
(at most ``2B - 2`` targets unscored).

Evaluation reads the rows through a :class:`RowLayout`: where each row lies in the stream, so
that a window is copied from the stream itself (a tensor, a memory-mapped corpus, or token
ids in a file, :class:`TokenReader`) and no ``int64`` copy of the split is ever made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from ..errors import DataError

IGNORE = -100


@dataclass
class Window:
    inputs: Tensor  # [B, L]
    targets: Tensor  # [B, L], IGNORE where padded
    loss_start: int  # positions >= loss_start count in the loss
    index: int  # window number within the pass


def train_rows(ids: Tensor, batch_size: int, seq_len: int) -> tuple[Tensor, Tensor]:
    """Split a stream into ``batch_size`` rows (remainder dropped); inputs and next tokens."""
    n = (ids.numel() - 1) // batch_size
    if n < 1 or n < min(seq_len, 2):
        raise DataError(
            f"the training split has {ids.numel()} tokens, too few for batch_size={batch_size} "
            f"rows of at least {min(seq_len, 2) + 1} tokens; use a larger corpus or smaller "
            "data.batch_size / data.seq_len"
        )
    rows = ids[: n * batch_size + 1]
    inputs = rows[:-1].view(batch_size, n)
    targets = rows[1:].view(batch_size, n)
    return inputs, targets


def eval_rows(ids: Tensor, batch_size: int) -> tuple[Tensor, Tensor]:
    """Rows covering every target of ``ids`` exactly once; the short tail is padded.

    Row ``r`` predicts targets ``ids[1 + r*n : 1 + (r+1)*n]``; padded targets are ``IGNORE``.
    """
    layout = row_layout("every", ids.numel(), batch_size)
    rows, n, n_targets = layout.rows, layout.columns, ids.numel() - 1
    inputs = torch.zeros(rows * n, dtype=torch.long)
    targets = torch.full((rows * n,), IGNORE, dtype=torch.long)
    inputs[:n_targets] = ids[:-1]
    targets[:n_targets] = ids[1:]
    return inputs.view(rows, n), targets.view(rows, n)


def reference_eval_rows(ids: Tensor, batch_size: int) -> tuple[Tensor, Tensor]:
    """Transformer-XL's ``LMOrderedIterator`` layout (``pytorch/data_utils.py``).

    ``n = len // B`` tokens per row, the remainder dropped; row ``r`` is ``ids[r*n : (r+1)*n]``
    and predicts its own tokens ``1 .. n-1``: its first token is an input only.
    """
    n = row_layout("reference", ids.numel(), batch_size).stride
    rows = ids[: n * batch_size].view(batch_size, n)
    return rows[:, :-1], rows[:, 1:]


#: ``data.eval_layout``: how an evaluation split becomes rows of inputs and targets (the
#: definition; evaluation reads the same rows a window at a time through :func:`row_layout`).
EVAL_LAYOUTS: dict[str, Callable[[Tensor, int], tuple[Tensor, Tensor]]] = {
    "every": eval_rows,
    "reference": reference_eval_rows,
}


class TokenReader(Protocol):
    """A token stream read a range at a time (:class:`TensorTokens`, or ids in a file)."""

    def __len__(self) -> int: ...

    def read(self, start: int, stop: int) -> Tensor:
        """``ids[start:stop]``, any integer type."""
        ...


class TensorTokens:
    """A tensor of ids (``int64``, or a memory-mapped ``uint16``/``uint32`` corpus) as a
    :class:`TokenReader`."""

    def __init__(self, ids: Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return self.ids.numel()

    def read(self, start: int, stop: int) -> Tensor:
        return self.ids[start:stop]


@dataclass(frozen=True)
class RowLayout:
    """Where the rows of an evaluation layout lie in the stream, without materialising them.

    Row ``r``, column ``c`` is the input ``ids[r * stride + c]`` predicting
    ``ids[r * stride + c + 1]`` while that target lies before ``limit``; after it, padding
    (input 0, target :data:`IGNORE`). :func:`row_layout` gives the layouts of
    :data:`EVAL_LAYOUTS` (the same rows, tested).
    """

    rows: int
    columns: int
    stride: int
    limit: int

    def targets(self, rows: slice | None = None) -> int:
        """Targets scored in ``rows`` (default: all)."""
        picked = range(self.rows)[rows or slice(None)]
        return sum(min(max(self.limit - 1 - r * self.stride, 0), self.columns) for r in picked)

    def windows(
        self,
        tokens: TokenReader,
        rows: slice,
        seq_len: int,
        context: int,
        memory: bool = False,
        span: int = 1 << 14,
    ) -> Iterator[Window]:
        """The windows of :func:`windows` over ``rows`` of this layout, as ``int64`` ids read
        from ``tokens`` ``span`` columns of every row at a time."""
        picked = range(self.rows)[rows]
        first = torch.arange(picked.start, picked.stop, picked.step) * self.stride
        valid = (self.limit - 1 - first).clamp(0, self.columns)  # each row's targets
        at, held = 0, torch.zeros(len(picked), 0, dtype=torch.long)  # ids of columns at..
        for i, (start, end, loss_start) in enumerate(
            iter_window_bounds(self.columns, seq_len, context, memory)
        ):
            if end >= at + held.shape[1]:  # the targets reach column ``end``
                at, held = start, self._read(tokens, first, valid, start, max(span, end - start))
            ids = held[:, start - at : end + 1 - at]
            counted = torch.arange(start, end) < valid[:, None]
            inputs = torch.where(counted, ids[:, :-1], 0)
            targets = torch.where(counted, ids[:, 1:], IGNORE)
            yield Window(inputs, targets, loss_start, i)

    @staticmethod
    def _read(tokens: TokenReader, first: Tensor, valid: Tensor, start: int, width: int) -> Tensor:
        """Ids of columns ``start .. start + width`` (one more: the last targets) of each row,
        0 beyond its targets."""
        out = torch.zeros(len(first), width + 1, dtype=torch.long)
        for i, (row, n) in enumerate(zip(first.tolist(), valid.tolist(), strict=True)):
            n = min(max(n - start, 0), width)  # targets of this row in the columns
            if n:
                out[i, : n + 1] = tokens.read(row + start, row + start + n + 1).long()
        return out


def row_layout(name: str, length: int, batch_size: int) -> RowLayout:
    """The rows of :data:`EVAL_LAYOUTS` ``[name]`` over a stream of ``length`` tokens."""
    if name == "every":
        n_targets = length - 1
        if n_targets < 1:
            raise DataError("an evaluation split needs at least 2 tokens")
        rows = min(batch_size, n_targets)
        n = math.ceil(n_targets / rows)
        return RowLayout(rows, n, n, length)
    if name == "reference":
        n = length // batch_size
        if n < 2:
            raise DataError(
                f"the reference evaluation layout needs at least 2 tokens per row: {length} "
                f"tokens in data.eval_batch_size={batch_size} rows; lower "
                "data.eval_batch_size or use data.eval_layout=every"
            )
        return RowLayout(batch_size, n - 1, n, n * batch_size)
    raise DataError(f"unknown evaluation layout {name!r}; choose one of {sorted(EVAL_LAYOUTS)}")


def window_bounds(
    length: int, seq_len: int, context: int, memory: bool = False
) -> list[tuple[int, int, int]]:
    """The bounds of :func:`iter_window_bounds` as a list (to index them by step)."""
    return list(iter_window_bounds(length, seq_len, context, memory))


def iter_window_bounds(
    length: int, seq_len: int, context: int, memory: bool = False
) -> Iterator[tuple[int, int, int]]:
    """``(start, end, loss_start)`` of each window over ``length`` positions, one at a time
    (a list of them grows with the text: about 150 bytes a window).

    The first window counts all its positions; each later one ends ``seq_len - context``
    further on and counts only the positions not counted before. A ragged last window
    reaches back a full ``seq_len`` for history; with ``memory`` (a Transformer-XL model,
    whose history is the previous segments' memory) it is shorter instead, starting
    ``context`` before the previous end as every other window does, as the XL data
    iterator does: reaching back would put tokens in the memory and the segment at once.
    """
    if not 0 <= context < seq_len:
        raise DataError(f"context={context} must be in [0, seq_len={seq_len})")
    stride = seq_len - context
    end = min(seq_len, length)
    yield 0, end, 0
    while end < length:
        new_end = min(end + stride, length)
        start = end - context if memory else max(0, new_end - seq_len)
        yield start, new_end, end - start
        end = new_end


def windows(
    inputs: Tensor, targets: Tensor, seq_len: int, context: int, memory: bool = False
) -> Iterator[Window]:
    """Iterate the windows of a ``[B, N]`` layout in stream order, as ``int64`` ids
    (``memory``: as :func:`window_bounds`).

    Only a window is converted: a memory-mapped ``uint16`` corpus stays on disk. With the
    rows of :data:`EVAL_LAYOUTS` these are the evaluation's windows, which
    :meth:`RowLayout.windows` reads from the stream without the rows (tested equal).
    """
    bounds = iter_window_bounds(inputs.shape[1], seq_len, context, memory)
    for i, (start, end, loss_start) in enumerate(bounds):
        yield Window(inputs[:, start:end].long(), targets[:, start:end].long(), loss_start, i)
