"""Divergence (``training/divergence.py``): a non-finite loss stops the run in one line naming
the step and keeps the last finite checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.api import load_pretrained
from highway_transformer.config import (
    Config,
)
from highway_transformer.errors import TrainingDiverged
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.trainer import Trainer, train


def test_nan_loss_raises_and_keeps_the_last_checkpoint(
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tiny_lm_config: Callable[..., Config],
) -> None:
    run = tmp_path / "run"
    config = tiny_lm_config(text_file, **{"train.eval_interval": 2, "train.max_steps": 10})
    trainer = Trainer(config, run, progress=False)
    real_nll = trainer.model.token_nll

    def poisoned(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        nll = real_nll(hidden, targets)
        if trainer.model.training and trainer.state.step >= 4:  # computing step 5
            return nll * float("nan")
        return nll

    monkeypatch.setattr(trainer.model, "token_nll", poisoned)
    with pytest.raises(TrainingDiverged, match="at step 5"):
        trainer.fit()
    state = ckpt.load_trainer_state(run / "checkpoint")
    assert state.step == 4
    model, saved_config, vocab = load_pretrained(run / "checkpoint")
    assert vocab == trainer.task.vocab and saved_config.model == trainer.config.model
    with torch.no_grad():
        hidden, _ = model(trainer.task.corpus.valid[:16].view(2, 8))
    assert torch.isfinite(hidden).all()


def test_huge_learning_rate_diverges(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(
        text_file,
        **{
            "train.optimizer": "sgd",
            "train.lr": 1e30,
            "train.clip": 0,
            "train.eval_interval": 1,
            "train.max_steps": 6,
        },
    )
    with pytest.raises(TrainingDiverged, match=r"at step \d+") as info:
        train(config, tmp_path / "run", progress=False)
    assert "train.lr" in str(info.value)
    # the first update already gives infinite weights: no checkpoint of them was written
    assert "at step 1" in str(info.value)
    assert not (tmp_path / "run" / "checkpoint").exists()
