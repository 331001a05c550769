"""Pixel-by-pixel classification (RT §4.1, Table 1): one pixel a step, the class at the end."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import Config, DataConfig
from ..config.names import PIXEL_DATASETS
from ..data.baselines import class_prior_baselines
from ..data.classifiers import (
    fit_logistic_regression,
    image_baselines,
    logistic_regression_scores,
)
from ..data.images import ImageSplits, Split, load_digits_default, load_mnist
from ..errors import unknown_choice
from ..models.sequence import build_sequence_model
from .base import (
    Batch,
    EpochOrder,
    Task,
    TaskState,
    check_max_len,
    finite_or_none,
    standard_error,
)

N_CLASSES = 10


def load_pixel_splits(config: Config) -> ImageSplits:
    """Digits (8x8, offline, the default) or MNIST from ``data.path`` (the files missing there
    are downloaded; every file is checked by its content's SHA-256); ``task.permute`` applies
    the fixed pixel permutation of seed ``train.seed``."""
    name = (config.task.dataset or "digits").strip().lower()
    if name not in PIXEL_DATASETS:
        raise unknown_choice("pixel data set (task.dataset)", name, PIXEL_DATASETS)
    seed = config.train.seed
    if name == "digits":
        return load_digits_default(permute=config.task.permute, seed=seed)
    return load_mnist(config.data.path, download=True, permute=config.task.permute, seed=seed)


def capped_images(splits: ImageSplits, data: DataConfig) -> ImageSplits:
    """The first images of each split up to ``data.max_train_tokens`` (train) and
    ``data.max_eval_tokens`` (valid, test) pixels, whole images, at least one; uncapped
    splits as they are."""

    def first(split: Split, cap: int | None) -> Split:
        if not cap:
            return split
        keep = max(1, cap // splits.seq_len)
        return split[0][:keep], split[1][:keep]

    return replace(
        splits,
        train=first(splits.train, data.max_train_tokens),
        valid=first(splits.valid, data.max_eval_tokens),
        test=first(splits.test, data.max_eval_tokens),
    )


class PixelsTask(Task):
    """Digits (8x8 default) or (p)MNIST, a pooled head over 10 classes; cross-entropy and
    accuracy."""

    name = "pixels"
    metrics = {"loss": "lower", "accuracy": "higher"}
    headline = "accuracy"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.splits = capped_images(load_pixel_splits(config), config.data)
        check_max_len(config, self.splits.seq_len, "a pixel sequence")
        self.order = EpochOrder(len(self.splits.train[0]), config.data.batch_size, self.generator)

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_sequence_model(config, 1, N_CLASSES, "pooled")

    def train_batches(self) -> Iterator[Batch]:
        x, y = self.splits.train
        for index in self.order:
            yield x[index], y[index]

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y = batch[0].to(self.device), batch[1].to(self.device)
        return F.cross_entropy(model(x).float(), y, reduction="sum"), int(y.numel())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        x_all, y_all = getattr(self.splits, split)
        cap = self.config.train.eval_max_tokens
        if quick and cap:  # the periodic evaluation reads at most ``cap`` pixels
            keep = max(1, cap // self.splits.seq_len)
            x_all, y_all = x_all[:keep], y_all[:keep]
        total, total_sq, correct = 0.0, 0.0, 0
        for rows in self.scored_slices(len(x_all)):  # this rank's share, summed over ranks below
            x, y = x_all[rows].to(self.device), y_all[rows].to(self.device)
            logits = model(x).float()
            losses = F.cross_entropy(logits, y, reduction="none").double()
            total, total_sq = total + float(losses.sum()), total_sq + float(losses.square().sum())
            correct += int((logits.argmax(-1) == y).sum())
        total, total_sq, correct = self.world.all_reduce_sum([total, total_sq, correct])
        n = max(len(x_all), 1)
        se = finite_or_none(standard_error(total, total_sq, len(x_all)))
        return {"loss": total / n, "accuracy": correct / n, "examples": len(x_all), "loss_se": se}

    def baselines(self) -> dict[str, dict[str, dict[str, float]]]:
        """The class prior, 1-nearest neighbour and logistic regression on the raw pixels,
        fit on the training split (:mod:`..data.classifiers`)."""
        splits = {"valid": self.splits.valid, "test": self.splits.test}
        return image_baselines(self.splits.train, splits, N_CLASSES)

    def trivial_losses(self, split: str) -> dict[str, float]:
        """The class prior and logistic regression of the training split: a model below the
        regression has learned less than a linear map of the pixels holds, so the prior alone
        would pass it (the regression's fit takes about 35 s on MNIST, once a run; 1-NN has
        no loss)."""
        images, labels = getattr(self.splits, split)
        found = class_prior_baselines(self.splits.train[1], {split: labels}, N_CLASSES)
        regression = fit_logistic_regression(*self.splits.train, N_CLASSES)
        return {
            "class prior": found["class prior"][split]["loss"],
            "logistic regression": logistic_regression_scores(regression, images, labels)["loss"],
        }

    def state_dict(self) -> TaskState:
        return {**super().state_dict(), **self.order.state_dict()}

    def load_state_dict(self, state: TaskState) -> None:
        super().load_state_dict(state)
        self.order.load_state_dict(state)
