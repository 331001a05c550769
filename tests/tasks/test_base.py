"""The task interface (``tasks/base.py``) and the task registry (``tasks/__init__.py``): the
length limit, evaluation rows shared by processes with every example once, resumable epoch
orders, and every task found by name."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch import Tensor, nn

from highway_transformer.config import Config
from highway_transformer.errors import ConfigError, DataError
from highway_transformer.runtime.world import World
from highway_transformer.tasks import TASKS, build_task_model, task_class
from highway_transformer.tasks.base import EpochOrder, Task, check_max_len


class Counting(Task):
    """The least a task must say; only the interface's own behaviour is under test."""

    name = "counting"

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return nn.Identity()

    def train_batches(self) -> Iterator[Tensor]:
        while True:
            yield torch.rand(2, generator=self.generator)

    def loss(self, model: nn.Module, batch: Tensor) -> tuple[Tensor, int]:
        return batch.sum(), batch.numel()

    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        return {"loss": 0.0}


def test_the_length_limit_is_one_line_and_zero_means_none() -> None:
    config = Config().replace(**{"task.max_len": 10})
    check_max_len(config, 10, "a piece")
    with pytest.raises(DataError) as info:
        check_max_len(config, 11, "a piece")
    assert str(info.value) == (
        "a piece has 11 steps, more than task.max_len=10; raise task.max_len (0 = no limit) or "
        "use shorter sequences"
    )
    check_max_len(Config().replace(**{"task.max_len": 0}), 10**6, "a piece")


@pytest.mark.parametrize(("n", "batch", "size"), [(10, 4, 1), (10, 4, 3), (9, 4, 2), (7, 3, 3)])
def test_evaluation_rows_cover_every_example_once_with_rows_for_every_rank(
    n: int, batch: int, size: int
) -> None:
    config = Config().replace(**{"data.eval_batch_size": batch})
    per_rank = []
    for rank in range(size):
        task = Counting(config, torch.device("cpu"))
        task.shard(World(rank=rank, size=size))
        per_rank.append(task.eval_slices(n))
    assert len({len(slices) for slices in per_rank}) == 1  # the same number of batches
    assert all(s.stop > s.start for slices in per_rank for s in slices)  # rows in each
    rows = sorted(i for slices in per_rank for s in slices for i in range(s.start, s.stop))
    assert rows == list(range(n))
    if size == 1:
        assert [(s.start, s.stop) for s in per_rank[0]] == [
            (a, min(a + batch, n)) for a in range(0, n, batch)
        ]


def test_too_few_examples_for_the_processes_is_a_one_line_error() -> None:
    task = Counting(Config(), torch.device("cpu"))
    task.shard(World(rank=0, size=4))
    with pytest.raises(DataError, match="^an evaluation split of 3 examples cannot be shared by 4"):
        task.eval_slices(3)


def test_epoch_orders_are_permutations_and_resume_where_they_stopped() -> None:
    order = EpochOrder(10, 4, torch.Generator().manual_seed(0))
    batches = iter(order)
    first = [next(batches) for _ in range(3)]  # 4 + 4 + 2: one epoch
    assert sorted(torch.cat(first).tolist()) == list(range(10))
    state = {k: v.clone() if isinstance(v, Tensor) else v for k, v in order.state_dict().items()}
    generator_state = order.generator.get_state()
    ahead = [next(batches).tolist() for _ in range(4)]
    again = EpochOrder(10, 4, torch.Generator())
    again.generator.set_state(generator_state)
    again.load_state_dict(state)
    assert [b.tolist() for b, _ in zip(iter(again), range(4), strict=False)] == ahead


def test_the_generator_is_seeded_and_its_state_round_trips() -> None:
    config = Config().replace(**{"train.seed": 5})
    a, b = Counting(config, torch.device("cpu")), Counting(config, torch.device("cpu"))
    assert torch.equal(next(a.train_batches()), next(b.train_batches()))
    state = a.state_dict()
    expected = next(a.train_batches())
    b.load_state_dict(state)
    assert torch.equal(next(b.train_batches()), expected)


def test_every_task_is_found_by_its_name(tiny_task_config: Callable[..., Config]) -> None:
    assert set(TASKS) == {"lm", "music", "pixels", "copy", "adding", "seq2seq", "rl"}
    assert all(task_class(name).name == name for name in TASKS)
    with pytest.raises(ConfigError, match=r"^unknown task \(task.name\) 'cpy'.*Did you mean"):
        task_class("cpy")
    model = build_task_model(tiny_task_config("seq2seq/toy"))
    assert type(model).__name__ == "EncoderDecoder"


def test_a_task_without_baselines_says_which_have_them() -> None:
    with pytest.raises(ConfigError, match="task counting has no trivial baselines"):
        Counting(Config(), torch.device("cpu")).baselines()
