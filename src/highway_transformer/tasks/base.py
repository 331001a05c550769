"""The task interface: a task owns its data, its model, its loss and its metrics.

One :class:`~highway_transformer.training.trainer.Trainer` runs every task through this
interface (the shape of fairseq's ``FairseqTask``): it asks the task for training batches,
the loss of a batch as ``(sum, count)`` (so means stay exact across batches and processes),
named metrics of a split, and the state to checkpoint so that a resumed run continues
bit for bit.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ..config import Config
from ..data.levels import metric_label
from ..errors import ConfigError, DataError
from ..runtime.world import World, shard_batch

Batch = Any
#: A task's carried state: JSON-able values and tensors (the checkpoint stores them apart).
TaskState = dict[str, Any]
#: Where an evaluation reports its progress: ``(units scored so far, units in all)`` of this
#: process (a progress bar); never read back, so metrics do not depend on it.
EvalProgress = Callable[[int, int], None]


def check_max_len(config: Config, length: int, what: str) -> None:
    """Raise :class:`DataError` when ``length`` steps exceed ``task.max_len`` (0: no limit)."""
    limit = config.task.max_len
    if limit and length > limit:
        raise DataError(
            f"{what} has {length} steps, more than task.max_len={limit}; raise task.max_len "
            "(0 = no limit) or use shorter sequences"
        )


def standard_error(total: float, total_sq: float, count: int) -> float:
    """Standard error of a mean from the sum and the sum of squares of its ``count`` items.

    Per-item losses of one text are correlated (neighbouring tokens share context), so this is
    a lower bound on the evaluation's noise: a difference smaller than it is certainly a tie.
    """
    if count < 2:
        return math.nan
    mean = total / count
    variance = max(total_sq / count - mean * mean, 0.0) * count / (count - 1)
    return math.sqrt(variance / count)


def finite_or_none(value: float) -> float | None:
    """``value``, or None where it is not a finite number (JSON has no NaN)."""
    return value if math.isfinite(value) else None


class Task(ABC):
    """One task: its model, a resumable stream of training batches, loss and evaluation."""

    name: ClassVar[str] = ""
    #: Metric name -> "lower" or "higher" (which is better); ``loss`` is always there.
    metrics: ClassVar[dict[str, str]] = {"loss": "lower"}
    #: The metric that tables report for this task.
    headline: ClassVar[str] = "loss"
    #: Whether the task's model carries Transformer-XL segment memory between batches
    #: (validation refuses memory settings for the tasks without it).
    supports_memory: ClassVar[bool] = False
    #: What the evaluation's progress counts (the unit of :data:`EvalProgress`).
    eval_unit: ClassVar[str] = "example"

    def __init__(self, config: Config, device: torch.device) -> None:
        self.config = config  # validated by the caller (highway_transformer.validation)
        self.device = device
        self.generator = torch.Generator().manual_seed(config.train.seed)
        self.world = World(device=device)
        self.eval_progress: EvalProgress | None = None  # set by :meth:`reporting`

    @contextlib.contextmanager
    def reporting(self, progress: EvalProgress | None) -> Iterator[None]:
        """The evaluations inside report their progress to ``progress`` (a progress bar of
        the caller's: the trainer's, ``highway eval``'s)."""
        self.eval_progress = progress
        try:
            yield
        finally:
            self.eval_progress = None

    @classmethod
    def for_checkpoint(cls, config: Config, device: torch.device, folder: Path) -> Task:
        """The task to evaluate the checkpoint in ``folder`` (its files, e.g. a vocabulary,
        are reused, nothing is downloaded where that matters)."""
        return cls(config, device)

    # ------------------------------------------------------------------ model

    @staticmethod
    @abstractmethod
    def build_model(config: Config) -> nn.Module:
        """The task's model, built from the config alone (enough to reload a checkpoint)."""

    # ------------------------------------------------------------------ training

    @abstractmethod
    def train_batches(self) -> Iterator[Batch]:
        """An endless stream of training batches, continuing from the task's position."""

    def shard(self, world: World) -> None:
        """Train and evaluate this rank's share of every batch (:meth:`eval_slices`).

        Every rank draws the same global batches of ``data.batch_size`` (same seed) and keeps
        its rows, so N processes compute the gradient of one.
        """
        self.world = world

    def local_batches(self) -> Iterator[Batch]:
        """This rank's rows of each training batch; ``train.accumulate`` make one step."""
        for batch in self.train_batches():
            yield shard_batch(batch, self.world)

    @abstractmethod
    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        """(summed training loss, number of items it sums over) for one batch."""

    @abstractmethod
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        """Metrics of ``split`` (valid | test), holding ``loss``; ``quick`` marks the periodic
        evaluation during training, which ``train.eval_max_tokens`` may cap."""

    def eval_slices(self, n: int) -> list[slice]:
        """This rank's rows of each evaluation batch of ``data.eval_batch_size`` of ``n``
        examples; summing over ranks (``world.all_reduce_sum``) gives the single-process
        figure.

        Every rank gets rows in every batch (a short last batch joins the one before), so all
        ranks run the same forward passes, which FSDP's all-gathers need.
        """
        size, world = self.config.data.eval_batch_size, self.world
        if n < world.size:
            raise DataError(
                f"an evaluation split of {n} examples cannot be shared by {world.size} "
                "processes; use fewer processes or raise train.eval_max_tokens"
            )
        starts = list(range(0, n, size))
        if len(starts) > 1 and n - starts[-1] < world.size:
            starts.pop()  # the short last batch joins the one before
        slices = []
        for start, stop in pairwise([*starts, n]):
            mine = world.uneven_rows(stop - start)
            slices.append(slice(start + mine.start, start + mine.stop))
        return slices

    def scored_slices(self, n: int) -> Iterator[slice]:
        """:meth:`eval_slices` of ``n`` examples, each batch's examples reported to
        :attr:`eval_progress` once the loop has scored it."""
        slices = self.eval_slices(n)
        total, done = sum(s.stop - s.start for s in slices), 0
        for rows in slices:
            yield rows
            done += rows.stop - rows.start
            if self.eval_progress is not None:
                self.eval_progress(done, total)

    @property
    def level(self) -> str | None:
        """What one token is (:mod:`~highway_transformer.data.levels`): a language model's
        vocabulary level; None for the other tasks."""
        return None

    def metric_label(self, key: str) -> str:
        """The name a person reads for the metric ``key`` (``bpc`` is ``bits/word`` for a
        word-level model)."""
        return key if self.level is None else metric_label(key, self.level)

    def loss_metrics(self, loss: float) -> dict[str, float]:
        """Figures derived from a mean loss, recorded beside it (none by default)."""
        return {}

    def train_metrics(self) -> dict[str, float]:
        """Figures of the training so far logged with each training record (none by
        default; the rl task's episodic return and success rate)."""
        return {}

    def baselines(self) -> dict[str, dict[str, dict[str, float]]]:
        """Trivial models estimated on the training split (``data/baselines.py``): ``{model:
        {split: {metric: value}}}`` for the valid and test splits, the lines to beat."""
        raise ConfigError(
            f"task {self.name} has no trivial baselines; they exist for the lm, music and "
            "pixels tasks"
        )

    def trivial_losses(self, split: str) -> dict[str, float]:
        """The losses on ``split`` of the cheap trivial models a trained model must beat
        (:mod:`.floor`): ``{model: loss}``, in the unit of the task's ``loss``; none by
        default (no check)."""
        return {}

    # ------------------------------------------------------------------ state

    def state_dict(self) -> TaskState:
        """What the task carries between steps (data position, generators, memory)."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: TaskState) -> None:
        self.generator.set_state(state["generator"])

    def resume_note(self) -> str | None:
        """A line for the log after :meth:`load_state_dict`: what the loaded state could not
        restore exactly (an older checkpoint's); none by default."""
        return None

    def write_checkpoint_files(self, folder: Path) -> None:
        """Write the files that belong with a checkpoint of this task (none by default)."""
        return None

    def check_checkpoint(self, folder: Path) -> None:
        """Raise :class:`~highway_transformer.errors.CheckpointError` when the checkpoint in
        ``folder`` was made with other data than this task holds (nothing by default)."""
        return None


class EpochOrder:
    """Shuffled epochs over ``n`` items, batch by batch, with a resumable position."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator) -> None:
        self.n, self.batch_size, self.generator = n, batch_size, generator
        self.order = torch.randperm(n, generator=generator)
        self.start = 0

    def __iter__(self) -> Iterator[Tensor]:
        while True:
            if self.start >= self.n:
                self.order, self.start = torch.randperm(self.n, generator=self.generator), 0
            chosen = self.order[self.start : self.start + self.batch_size]
            self.start += self.batch_size
            yield chosen

    def state_dict(self) -> TaskState:
        return {"order": self.order, "order_start": self.start}

    def load_state_dict(self, state: TaskState) -> None:
        self.order, self.start = state["order"].clone(), int(state["order_start"])
