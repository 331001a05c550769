"""Decoding buffers against the obvious ``torch.cat`` versions (nn/decoding.py)."""

from __future__ import annotations

import torch

from highway_transformer.nn.decoding import AppendBuffer, DistanceTable, KVCache


def test_append_buffer_equals_concatenation_and_never_rewrites_a_view() -> None:
    """Appends of uneven sizes, with and without ``keep``, through several growths: every
    returned view equals the concatenation oracle, and views handed out earlier still hold
    what they held."""
    torch.manual_seed(0)
    buffer, oracle = AppendBuffer(dim=1), torch.empty(2, 0, 3)
    handed_out: list[tuple[torch.Tensor, torch.Tensor]] = []
    for step, (n_new, keep) in enumerate([(5, None), (1, None), (1, 4), (7, None), (1, 2)] * 6):
        new = torch.randn(2, n_new, 3)
        kept = oracle if keep is None else oracle[:, oracle.shape[1] - min(keep, oracle.shape[1]) :]
        oracle = torch.cat([kept, new], dim=1)
        got = buffer.append(new, keep)
        assert torch.equal(got, oracle), step
        assert buffer.length == oracle.shape[1]
        handed_out.append((got, oracle.clone()))
    for view, value in handed_out:
        assert torch.equal(view, value)


def test_append_buffer_reorders_rows_and_restarts_on_another_shape() -> None:
    buffer = AppendBuffer(dim=2)
    a = torch.randn(3, 2, 4, 5)
    buffer.append(a)
    buffer.reorder(torch.tensor([2, 2, 0]))
    assert torch.equal(buffer.view(), a[[2, 2, 0]])
    b = torch.randn(1, 2, 1, 5)  # another batch: nothing of the old rows can be kept
    buffer.clear()
    assert torch.equal(buffer.append(b), b)


def test_kv_cache_keeps_the_last_positions() -> None:
    cache = KVCache()
    keys, values = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    cache.extend(keys[:, :, :5], values[:, :, :5])
    k, v = cache.extend(keys[:, :, 5:], values[:, :, 5:], keep=3)
    assert torch.equal(k, keys[:, :, 2:]) and torch.equal(v, values[:, :, 2:])
    assert cache.length == 4 and torch.equal(cache.keys, keys[:, :, 2:])


def test_distance_table_computes_each_distance_once() -> None:
    """Rows for the distances K-1 … 0 as K grows; compute sees each distance once, and a
    new key (another clamp_len) starts over."""
    calls: list[tuple[int, int]] = []

    def compute(lo: int, hi: int) -> torch.Tensor:
        calls.append((lo, hi))
        return torch.arange(hi - 1, lo - 1, -1, dtype=torch.float32)[:, None].repeat(1, 2)

    table = DistanceTable()
    for k_len in (3, 4, 4, 40, 41):
        rows = table.rows(k_len, compute)
        assert torch.equal(rows[:, 0], torch.arange(k_len - 1, -1, -1, dtype=torch.float32))
    assert calls == [(0, 3), (3, 4), (4, 40), (40, 41)]
    table.rows(2, compute, key="clamp 1")
    assert calls[-1] == (0, 2)


def test_distance_table_computes_ahead_in_few_calls() -> None:
    """Decoding grows K by one per token: with ``ahead`` the table computes in doubling
    chunks, and every slice still holds the right distances."""
    calls: list[tuple[int, int]] = []

    def compute(lo: int, hi: int) -> torch.Tensor:
        calls.append((lo, hi))
        return torch.arange(hi - 1, lo - 1, -1, dtype=torch.float32)[:, None]

    table = DistanceTable()
    for k_len in range(5, 200):
        rows = table.rows(k_len, compute, ahead=2 * k_len)
        assert torch.equal(rows[:, 0], torch.arange(k_len - 1, -1, -1, dtype=torch.float32))
    assert calls == [(0, 10), (10, 22), (22, 46), (46, 94), (94, 190), (190, 382)]
    assert torch.equal(table.span(3, 6)[:, 0], torch.tensor([5.0, 4.0, 3.0]))
