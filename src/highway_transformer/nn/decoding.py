"""Buffers for incremental decoding: appends cost the new entries, not the whole history.

A decoder that appends one position per step with ``torch.cat`` copies everything it holds
at every step (O(n²) over a generation, and one allocation per tensor per step). These
buffers reserve room ahead (doubling), write each new entry in place and hand out views:

* :class:`AppendBuffer` — one tensor growing along one dimension, optionally keeping only
  its last ``keep`` entries (Transformer-XL memory, a sliding key/value window);
* :class:`KVCache` — the keys and values of one attention sublayer;
* :class:`DistanceTable` — rows for the distances ``K-1 … 0`` (Transformer-XL's ``R`` and
  ``W_kR R``), which grow at the *front* as ``K`` grows: stored back to front, so the rows
  of any ``K`` are one contiguous slice.

A view handed out is never written afterwards: appends write past every view's end, and
compaction or growth moves the kept entries into a *new* tensor. So a caller may keep what
it was given (e.g. the memory returned by a forward pass) while decoding goes on.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

MIN_CAPACITY = 16


class AppendBuffer:
    """A tensor that grows along ``dim`` by appends, with room reserved ahead."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.data: Tensor | None = None  # [..., capacity, ...]; entries [start, end) are held
        self.start = 0
        self.end = 0

    @property
    def length(self) -> int:
        return self.end - self.start

    def view(self) -> Tensor | None:
        """The entries held (a view), or None before the first append."""
        if self.data is None:
            return None
        return self.data.narrow(self.dim, self.start, self.length)

    def clear(self) -> None:
        self.data, self.start, self.end = None, 0, 0

    def append(self, new: Tensor, keep: int | None = None) -> Tensor:
        """Append ``new`` after the last ``keep`` entries held (None: all of them) and return
        those entries followed by ``new`` (a view)."""
        n_new = new.shape[self.dim]
        held = self.length if keep is None else min(keep, self.length)
        if self.data is None or not self._fits(new, n_new):
            self._move(new, held, n_new)
        assert self.data is not None
        self.start = self.end - held
        self.data.narrow(self.dim, self.end, n_new).copy_(new)
        self.end += n_new
        return self.data.narrow(self.dim, self.start, held + n_new)

    def reorder(self, rows: Tensor) -> None:
        """Keep (and duplicate) the batch rows ``rows`` (dimension 0)."""
        if self.data is not None:
            self.data = self.data[rows]

    def _fits(self, new: Tensor, n_new: int) -> bool:
        assert self.data is not None

        def rest(t: Tensor) -> list[int]:
            return [size for i, size in enumerate(t.shape) if i != self.dim]

        return (
            rest(self.data) == rest(new)
            and self.data.dtype == new.dtype
            and self.data.device == new.device
            and self.end + n_new <= self.data.shape[self.dim]
        )

    def _move(self, new: Tensor, held: int, n_new: int) -> None:
        """A new tensor with room for ``2 × (held + new)`` entries, the ``held`` last ones
        copied to its front (the old tensor, and every view of it, stays as it was)."""
        capacity = max(MIN_CAPACITY, 2 * (held + n_new))
        shape = list(new.shape)
        shape[self.dim] = capacity
        data = new.new_empty(shape)
        if held:
            kept = self.data.narrow(self.dim, self.end - held, held)  # type: ignore[union-attr]
            data.narrow(self.dim, 0, held).copy_(kept)
        self.data, self.start, self.end = data, 0, held


class KVCache:
    """Keys and values ``[B, H, K, d]`` of the positions seen so far, for one attention
    sublayer (appends cost the new positions only)."""

    def __init__(self) -> None:
        self._keys = AppendBuffer(dim=2)
        self._values = AppendBuffer(dim=2)

    @property
    def length(self) -> int:
        return self._keys.length

    @property
    def keys(self) -> Tensor | None:
        return self._keys.view()

    @property
    def values(self) -> Tensor | None:
        return self._values.view()

    def extend(
        self, keys: Tensor, values: Tensor, keep: int | None = None
    ) -> tuple[Tensor, Tensor]:
        """Append ``[B, H, L, d]`` keys/values after the last ``keep`` positions held (None:
        all); return the keys/values of those positions and the new ones."""
        return self._keys.append(keys, keep), self._values.append(values, keep)

    def clear(self) -> None:
        self._keys.clear()
        self._values.clear()

    def reorder(self, rows: Tensor) -> None:
        """Keep (and duplicate) batch rows ``rows`` (beam search)."""
        self._keys.reorder(rows)
        self._values.reorder(rows)


class DistanceTable:
    """Rows ``[K, W]`` for the distances ``K-1 … 0``, computed once per distance.

    ``rows(k_len, compute)`` calls ``compute(lo, hi)`` for the distances it has not seen,
    which must return their rows in *descending* order of distance (``hi-1 … lo``), and
    returns the rows of the distances ``k_len-1 … 0`` as one contiguous view. With
    ``ahead``, a growing table computes the rows of up to ``ahead`` distances at once, so
    decoding one token at a time calls ``compute`` a logarithmic number of times.
    """

    def __init__(self) -> None:
        self.data: Tensor | None = None  # rows [capacity - held, capacity) = distances held-1 … 0
        self.held = 0
        self.key: object = None  # what the rows depend on besides the distance

    def rows(
        self,
        k_len: int,
        compute: Callable[[int, int], Tensor],
        key: object = None,
        ahead: int = 0,
    ) -> Tensor:
        if key != self.key:  # e.g. another clamp_len: the rows are other rows
            self.data, self.held, self.key = None, 0, key
        if k_len > self.held:
            self._grow(max(k_len, ahead), compute)
        return self.span(0, k_len)

    def span(self, lo: int, hi: int) -> Tensor:
        """The rows of the distances ``hi-1 … lo`` (all held)."""
        assert self.data is not None and hi <= self.held
        capacity = self.data.shape[0]
        return self.data[capacity - hi : capacity - lo]

    def _grow(self, held: int, compute: Callable[[int, int], Tensor]) -> None:
        new = compute(self.held, held)
        capacity = 0 if self.data is None else self.data.shape[0]
        if held > capacity:  # a new tensor: rows handed out before stay as they were
            grown = new.new_empty(max(MIN_CAPACITY, 2 * held), new.shape[1])
            if self.held:
                assert self.data is not None
                grown[grown.shape[0] - self.held :] = self.data[capacity - self.held :]
            self.data, capacity = grown, grown.shape[0]
        assert self.data is not None
        self.data[capacity - held : capacity - self.held] = new
        self.held = held
