"""Evaluate a checkpoint through the task named in its config (``highway eval``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from ..config import build_config
from ..errors import ConfigError
from ..evaluate import autocast_context
from ..tasks import build_task_model, task_class
from . import checkpoint as ckpt

SPLITS = ("valid", "test")


def evaluate_checkpoint(
    folder: str | Path,
    splits: Sequence[str] = SPLITS,
    device: str | torch.device = "cpu",
    overrides: Sequence[str] = (),
) -> dict[str, dict[str, float]]:
    """The task's metrics of a checkpoint (or run folder) on ``splits``; ``overrides`` are
    ``KEY=VALUE`` settings applied before the data are loaded (``data.path=DIR``)."""
    for split in splits:
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; choose valid or test")
    device = torch.device(device)
    folder = ckpt.resolve(folder)
    config = build_config(ckpt.read_config(folder), None, list(overrides))
    model = build_task_model(config)  # after the overrides: evaluation settings apply
    ckpt.load_weights(model, folder)
    model.to(device).eval()
    task = task_class(config.task.name).for_checkpoint(config, device, folder)
    with torch.no_grad(), autocast_context(device, config.train.precision):
        return {split: task.evaluate(model, split) for split in splits}
