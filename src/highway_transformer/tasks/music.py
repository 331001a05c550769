"""Polyphonic music (RT §4.2, Table 2): predict each step's 88 notes from the steps before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor, nn

from ..config import Config, DataConfig
from ..data import music as music_data
from ..data.baselines import music_baselines
from ..errors import DataError
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


def load_music_splits(config: Config) -> music_data.MusicSplits:
    """The music corpus named by ``task.dataset`` (default Nottingham) from ``data.path``,
    downloaded (checksum-checked) when it is not there."""
    name = config.task.dataset or "nottingham"
    try:
        return music_data.load_music(name, data_dir=config.data.path)
    except DataError:
        if Path(name).suffix or "/" in name or "\\" in name:  # a file path: nothing to fetch
            raise
        return music_data.load_music(name, data_dir=config.data.path, download=True)


def first_pieces(pieces: list[Tensor], max_steps: int) -> list[Tensor]:
    """The leading pieces whose time steps add up to at most ``max_steps`` (at least one)."""
    kept, steps = [], 0
    for piece in pieces:
        steps += int(piece.shape[0])
        if kept and steps > max_steps:
            break
        kept.append(piece)
    return kept


def capped_pieces(splits: music_data.MusicSplits, data: DataConfig) -> music_data.MusicSplits:
    """The first pieces of each split up to ``data.max_train_tokens`` (train) and
    ``data.max_eval_tokens`` (valid, test) time steps (:func:`first_pieces`); uncapped splits
    as they are."""

    def first(pieces: list[Tensor], cap: int | None) -> list[Tensor]:
        return first_pieces(pieces, cap) if cap else pieces

    return music_data.MusicSplits(
        first(splits.train, data.max_train_tokens),
        first(splits.valid, data.max_eval_tokens),
        first(splits.test, data.max_eval_tokens),
    )


class MusicTask(Task):
    """Piano rolls as 88 Bernoulli logits a step; NLL per time step.

    As in the RT / TCN code the model reads the roll shifted by one step and the loss covers
    steps 1..T-1 of each piece (step 0 has nothing before it); the NLL is summed over the 88
    notes and averaged over all counted steps of the split (:func:`bernoulli_nll`).
    """

    name = "music"
    metrics = {"loss": "lower", "nll": "lower"}
    headline = "nll"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.splits = capped_pieces(load_music_splits(config), config.data)
        parts = (self.splits.train, self.splits.valid, self.splits.test)
        for split, pieces in zip(("train", "valid", "test"), parts, strict=True):
            longest = max(int(p.shape[0]) for p in pieces)
            check_max_len(config, longest, f"the longest {split} piece")
        self.order = EpochOrder(len(self.splits.train), config.data.batch_size, self.generator)

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_sequence_model(config, music_data.N_KEYS, music_data.N_KEYS, "per_step")

    def train_batches(self) -> Iterator[Batch]:
        for index in self.order:
            pieces = [self.splits.train[i] for i in index.tolist()]
            yield next(music_data.music_batches(pieces, len(pieces), predict_first=False))

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        inputs, targets, mask = (t.to(self.device) for t in batch)
        count = int(mask.sum())
        nll = music_data.bernoulli_nll(model(inputs).float(), targets, mask)
        return nll * count, count

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        pieces = getattr(self.splits, split)
        cap = self.config.train.eval_max_tokens
        if quick and cap:  # the periodic evaluation reads at most ``cap`` steps
            pieces = first_pieces(pieces, cap)
        # longest pieces together: less padding (outputs at real steps do not depend on it)
        pieces = sorted(pieces, key=lambda p: int(p.shape[0]))
        total, total_sq, steps = 0.0, 0.0, 0
        for rows in self.scored_slices(len(pieces)):  # this rank's share, summed over ranks below
            mine = pieces[rows]
            batch = music_data.music_batches(mine, len(mine), predict_first=False)
            inputs, targets, mask = next(batch)
            count = int(mask.sum())
            logits = model(inputs.to(self.device)).float()
            nll = music_data.bernoulli_nll(logits, targets.to(self.device), mask.to(self.device))
            total += float(nll) * count
            per_step = music_data.step_nlls(logits, targets.to(self.device)).double()
            total_sq += float((per_step.square() * mask.to(per_step.device)).sum())
            steps += count
        total, total_sq, steps = self.world.all_reduce_sum([total, total_sq, steps])
        nll, steps = total / max(steps, 1), int(steps)
        se = finite_or_none(standard_error(total, total_sq, steps))
        return {"loss": nll, "nll": nll, "steps": steps, "loss_se": se}

    def baselines(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per-note frequency and previous-step (Markov) models of the training pieces."""
        splits = {"valid": self.splits.valid, "test": self.splits.test}
        pieces = {name: [p.numpy() for p in split] for name, split in splits.items()}
        found = music_baselines([p.numpy() for p in self.splits.train], pieces)
        return {
            model: {split: {"loss": nll, "nll": nll} for split, nll in by.items()}
            for model, by in found.items()
        }

    def trivial_losses(self, split: str) -> dict[str, float]:
        """The per-note frequency and previous-step models of the training pieces."""
        pieces = [p.numpy() for p in getattr(self.splits, split)]
        found = music_baselines([p.numpy() for p in self.splits.train], {split: pieces})
        return {model: by[split] for model, by in found.items()}

    def state_dict(self) -> TaskState:
        return {**super().state_dict(), **self.order.state_dict()}

    def load_state_dict(self, state: TaskState) -> None:
        super().load_state_dict(state)
        self.order.load_state_dict(state)
