"""The generated tasks of the TCN suite: copy memory and the adding problem.

Training batches are drawn afresh from the task's generator; valid and test are fixed sets
of :data:`GENERATED_EVAL_SEQUENCES` sequences (fewer when ``train.eval_max_tokens`` caps
the positions).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import Config
from ..data.synthetic import adding_problem_batch, copy_memory_batch
from ..models.sequence import build_sequence_model
from .base import Batch, Task, check_max_len, finite_or_none, standard_error

#: Sequences per evaluation split of the generated tasks, unless ``train.eval_max_tokens``
#: caps the positions.
GENERATED_EVAL_SEQUENCES = 1024
#: Copy memory as in the TCN repository: 8 symbols, 10 to copy.
COPY_SYMBOLS, COPY_LEN = 8, 10


def eval_count(config: Config, length: int) -> int:
    """Sequences of ``length`` steps per evaluation split of a generated task."""
    cap = config.train.eval_max_tokens
    if cap:
        return max(1, min(GENERATED_EVAL_SEQUENCES, cap // max(length, 1)))
    return GENERATED_EVAL_SEQUENCES


def _eval_generator(config: Config, offset: int) -> torch.Generator:
    return torch.Generator().manual_seed(config.train.seed + offset)


class CopyTask(Task):
    """Copy memory: recall 10 symbols after ``task.length`` blank steps.

    The loss is the cross-entropy over all ``T = length + 20`` steps (as the TCN code
    computes it); ``accuracy`` counts the 10 copied steps only. A blank-only guess scores
    ``10 ln 8 / T``.
    """

    name = "copy"
    metrics = {"loss": "lower", "accuracy": "higher"}
    headline = "accuracy"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.delay = config.task.length
        self.seq_len = self.delay + 2 * COPY_LEN
        check_max_len(config, self.seq_len, "a copy-memory sequence")
        n = eval_count(config, self.seq_len)
        self.eval_sets = {
            split: copy_memory_batch(
                n, self.delay, COPY_SYMBOLS, COPY_LEN, _eval_generator(config, offset)
            )
            for split, offset in (("valid", 1), ("test", 2))
        }

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        vocab = COPY_SYMBOLS + 2
        return build_sequence_model(config, vocab, vocab, "per_step", token_input=True)

    def train_batches(self) -> Iterator[Batch]:
        while True:
            yield copy_memory_batch(
                self.config.data.batch_size, self.delay, COPY_SYMBOLS, COPY_LEN, self.generator
            )

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y = batch[0].to(self.device), batch[1].to(self.device)
        logits = model(x).float()
        flat = logits.reshape(-1, logits.shape[-1])
        return F.cross_entropy(flat, y.reshape(-1), reduction="sum"), y.numel()

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        x_all, y_all = self.eval_sets[split]
        total, total_sq, correct = 0.0, 0.0, 0
        for rows in self.scored_slices(len(x_all)):  # this rank's share, summed over ranks below
            x, y = x_all[rows].to(self.device), y_all[rows].to(self.device)
            logits = model(x).float()
            # one loss an example (its steps are not independent): the mean over its steps
            losses = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").double()
            per_example = losses.mean(1)
            total += float(per_example.sum())
            total_sq += float(per_example.square().sum())
            copied = logits[:, -COPY_LEN:].argmax(-1) == y[:, -COPY_LEN:]
            correct += int(copied.sum())
        total, total_sq, correct = self.world.all_reduce_sum([total, total_sq, correct])
        n = len(x_all)
        return {
            "loss": total / n,
            "accuracy": correct / (n * COPY_LEN),
            "baseline_loss": self.memoryless_loss(),
            "loss_se": finite_or_none(standard_error(total, total_sq, n)),
        }

    def trivial_losses(self, split: str) -> dict[str, float]:
        return {"memoryless": self.memoryless_loss()}

    def memoryless_loss(self) -> float:
        """The loss of a model that copies nothing: uniform over the symbols on the copied
        steps, every other step predicted exactly."""
        return COPY_LEN * math.log(COPY_SYMBOLS) / self.seq_len


class AddingTask(Task):
    """The adding problem: the sum of the two marked values of ``task.length`` steps; the
    loss is the mean squared error (predicting 1 scores about 0.167)."""

    name = "adding"
    metrics = {"loss": "lower", "mse": "lower"}
    headline = "mse"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.length = config.task.length
        check_max_len(config, self.length, "an adding-problem sequence")
        n = eval_count(config, self.length)
        self.eval_sets = {
            split: adding_problem_batch(n, self.length, _eval_generator(config, offset))
            for split, offset in (("valid", 1), ("test", 2))
        }

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_sequence_model(config, 2, 1, "pooled")

    def train_batches(self) -> Iterator[Batch]:
        while True:
            yield adding_problem_batch(self.config.data.batch_size, self.length, self.generator)

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y = batch[0].to(self.device), batch[1].to(self.device)
        return F.mse_loss(model(x).float().squeeze(-1), y, reduction="sum"), y.numel()

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        x_all, y_all = self.eval_sets[split]
        total, total_sq = 0.0, 0.0
        for rows in self.scored_slices(len(x_all)):  # this rank's share, summed over ranks below
            x, y = x_all[rows].to(self.device), y_all[rows].to(self.device)
            errors = F.mse_loss(model(x).float().squeeze(-1), y, reduction="none").double()
            total, total_sq = total + float(errors.sum()), total_sq + float(errors.square().sum())
        total, total_sq = self.world.all_reduce_sum([total, total_sq])
        mse = total / len(x_all)
        se = finite_or_none(standard_error(total, total_sq, len(x_all)))
        return {"loss": mse, "mse": mse, "loss_se": se}

    def trivial_losses(self, split: str) -> dict[str, float]:
        """Always predicting 1, the expected sum (about 0.167)."""
        targets = self.eval_sets[split][1].double()
        return {"constant 1": float((targets - 1.0).square().mean())}
