"""Gradient accumulation (``training/accumulation.py``): K micro-batches of B rows give the
gradient of one batch of K·B rows, unequal item counts are weighted exactly, every micro-batch
but the last runs without gradient sync, and the stop flag rides on the step's all-reduce."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest
import torch

from highway_transformer.config import ModelConfig
from highway_transformer.models.lm import LanguageModel
from highway_transformer.runtime.world import World
from highway_transformer.training.accumulation import MicroBatch, accumulate_gradients

V = 11


@pytest.fixture
def model(tiny_model_config: Callable[..., ModelConfig]) -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(tiny_model_config(vocab_size=V)).double().eval()


def _grads(model: LanguageModel) -> list[torch.Tensor]:
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def _micro(model: LanguageModel, x: torch.Tensor, y: torch.Tensor) -> MicroBatch:
    """A micro-batch's summed NLL over the targets that count (not -100)."""
    return lambda: (model(x, targets=y, reduction="sum").loss, int((y != -100).sum()))


def _tokens(rows: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, V, (rows, 9), generator=torch.Generator().manual_seed(seed))
    return ids[:, :-1], ids[:, 1:].clone()


@pytest.mark.parametrize(("k", "b"), [(1, 6), (2, 3), (3, 2), (6, 1)])
def test_k_micro_batches_of_b_rows_are_one_batch_of_k_b_rows(
    model: LanguageModel, k: int, b: int
) -> None:
    x, y = _tokens(k * b)
    whole = model(x, targets=y).loss  # the mean over all K·B rows
    whole.backward()
    expected = _grads(model)
    parts = [_micro(model, x[i * b : (i + 1) * b], y[i * b : (i + 1) * b]) for i in range(k)]
    mean, count, stop = accumulate_gradients(model, World(), parts)
    assert (count, stop) == (k * b * 8, False)
    assert mean == pytest.approx(whole.item(), rel=1e-12)
    for got, want in zip(_grads(model), expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_unequal_counts_are_weighted_by_their_items(model: LanguageModel) -> None:
    x, y = _tokens(4)
    y[0, 1:] = -100  # the first micro-batch counts 1 + 8 targets, the second 16
    y[1] = -100
    y[1, 0] = 7
    whole = model(x, targets=y).loss  # the mean over the 25 counted targets
    whole.backward()
    expected = _grads(model)
    mean, count, _ = accumulate_gradients(
        model, World(), [_micro(model, x[:2], y[:2]), _micro(model, x[2:], y[2:])]
    )
    assert count == 2 + 16
    assert mean == pytest.approx(whole.item(), rel=1e-12)
    for got, want in zip(_grads(model), expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_sync_is_off_for_all_but_the_last_and_check_runs_before_each_backward(
    model: LanguageModel,
) -> None:
    x, y = _tokens(3)
    events: list[str] = []
    syncing = [True]

    @contextmanager
    def sync_off() -> Iterator[None]:
        syncing[0] = False
        yield
        syncing[0] = True

    def backward(loss: torch.Tensor) -> None:
        events.append(f"backward sync={syncing[0]}")
        loss.backward()

    parts = [_micro(model, x[i : i + 1], y[i : i + 1]) for i in range(3)]
    accumulate_gradients(
        model, World(), parts, backward, lambda mean: events.append("check"), sync_off
    )
    assert events == ["check", "backward sync=False"] * 2 + ["check", "backward sync=True"]

    def diverged(mean: float) -> None:
        raise FloatingPointError(f"loss {mean}")

    model.zero_grad(set_to_none=True)
    with pytest.raises(FloatingPointError):
        accumulate_gradients(model, World(), parts, check=diverged)
    assert all(p.grad is None for p in model.parameters())  # stopped before any backward


class _TwoRanks(World):
    """Rank 0 of two, the other rank's numbers added in by hand; records each all-reduce."""

    def __init__(self, other: list[list[float]]) -> None:
        super().__init__(rank=0, size=2)
        object.__setattr__(self, "other", other)
        object.__setattr__(self, "reduced", [])

    def all_reduce_sum(self, values: Sequence[float]) -> list[float]:
        self.reduced.append([float(v) for v in values])
        theirs = self.other[len(self.reduced) - 1]
        return [float(v) + t for v, t in zip(values, theirs, strict=True)]


@pytest.mark.parametrize(("mine", "theirs", "stops"), [(False, 0.0, False), (False, 1.0, True),
                                                       (True, 0.0, True)])  # fmt: skip
def test_the_stop_flag_rides_on_the_steps_all_reduce(
    model: LanguageModel, mine: bool, theirs: float, stops: bool
) -> None:
    x, y = _tokens(2)
    world = _TwoRanks([[8.0], [10.0, 8.0, theirs]])  # the other rank: 8 targets, loss sum 10
    parts = [_micro(model, x[:1], y[:1]), _micro(model, x[1:], y[1:])]
    mean, count, stop = accumulate_gradients(model, world, parts, stop_asked=lambda: mine)
    local = sum(float(p()[0].detach()) for p in parts)
    assert world.reduced == [[8.0], [pytest.approx(local), 16.0, float(mine)]]  # two, no more
    assert (count, stop) == (24, stops)
    assert mean == pytest.approx((local + 10.0) / 24)
