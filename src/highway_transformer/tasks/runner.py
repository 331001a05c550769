"""Train and evaluate one task of ``config.task.name`` into a run folder.

A run folder holds ``config.yaml``, ``metrics.jsonl`` (one record per log or evaluation, each
with ``step``, ``split``, ``loss`` and the task's metrics), ``checkpoint/`` (the last
weights), ``best/`` (the best validation weights) and ``results.json`` (valid and test
metrics of the best weights). A checkpoint folder is ``model.safetensors`` + ``config.json``;
:func:`load_task_checkpoint` rebuilds the model from it.

The loop follows :class:`~highway_transformer.config.TrainConfig`: optimiser and schedule
(:mod:`~highway_transformer.train.optim`), gradient clipping, ``max_steps``,
``eval_interval``, ``log_interval``, ``seed``, ``precision`` (autocast) and ``device``.
``task.name=lm`` hands over to the language-model trainer.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_model
from torch import nn

from ..config import Config, save_config
from ..errors import ConfigError
from ..evaluate import autocast_context
from ..train import checkpoint as ckpt
from ..train.optim import LRSchedule, apply_gradients, build_optimizer, check_finite, set_lr
from ..train.runlock import own_run_folder
from ..train.trainer import setup_runtime, train
from .definitions import Task, build_task_model, task_class

METRICS_FILE = "metrics.jsonl"
RESULTS_FILE = "results.json"


def save_task_checkpoint(folder: str | Path, model: nn.Module, config: Config) -> Path:
    """Write ``model.safetensors`` and ``config.json`` into ``folder`` atomically."""

    def write(tmp: Path) -> None:
        save_model(model, str(tmp / ckpt.MODEL_FILE))
        (tmp / ckpt.CONFIG_FILE).write_text(config.to_json(), encoding="utf-8")

    ckpt.write_atomically(Path(folder), write)
    return Path(folder)


def load_task_checkpoint(
    folder: str | Path, device: str | torch.device = "cpu"
) -> tuple[nn.Module, Config]:
    """``(model, config)`` of a task checkpoint (or run folder), in eval mode on ``device``."""
    folder = ckpt.resolve(folder)
    config = ckpt.read_config(folder)
    model = build_task_model(config)
    ckpt.load_weights(model, folder)
    return model.to(device).eval(), config


def evaluate_task_checkpoint(
    folder: str | Path,
    splits: tuple[str, ...] = ("valid", "test"),
    device: str | torch.device = "cpu",
    overrides: dict[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Metrics of a task checkpoint (or run folder) on ``splits``; ``overrides`` are dotted
    config keys applied before the data are loaded (``{"data.path": DIR}``)."""
    model, config = load_task_checkpoint(folder, device)
    if overrides:
        config = config.replace(**overrides)
    device = torch.device(device)
    task = task_class(config.task.name)(config, device)
    out = {}
    with autocast_context(device, config.train.precision):
        for split in splits:
            if split not in ("valid", "test"):
                raise ConfigError(f"unknown split {split!r}; choose valid or test")
            out[split] = task.evaluate(model, split)
    return out


class TaskRun:
    """Trains one task configuration into one run folder."""

    def __init__(
        self,
        config: Config,
        out_dir: str | Path,
        progress: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config.validate()
        self.out_dir = Path(out_dir)
        self.progress = progress
        self.log = log or (lambda message: None)
        t = config.train
        self.device = setup_runtime(t)
        self.task: Task = task_class(config.task.name)(config, self.device)
        self.model = self.task.build_model(config).to(self.device)
        self.optimizer = build_optimizer(self.model.parameters(), t)
        self.schedule = LRSchedule(t)
        self.step = 0
        self.elapsed = 0.0
        self.items = 0
        self.best_valid = math.inf
        self.best_step = 0

    def fit(self) -> dict[str, Any]:
        """Train to ``train.max_steps``, evaluating every ``eval_interval`` steps."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        save_config(self.config, self.out_dir / "config.yaml")
        (self.out_dir / METRICS_FILE).write_text("", encoding="utf-8")
        t = self.config.train
        batches = self.task.train_batches()
        bar = self._progress_bar()
        running, running_n, window_items, window_time = 0.0, 0, 0, 0.0
        self.model.train()
        while self.step < t.max_steps:
            started = time.perf_counter()
            value, count = self._train_step(next(batches))
            spent = time.perf_counter() - started
            self.step += 1
            self.elapsed += spent
            self.items += count
            running, running_n = running + value, running_n + 1
            window_items, window_time = window_items + count, window_time + spent
            if self.step % t.log_interval == 0 or self.step == t.max_steps:
                rate = window_items / max(window_time, 1e-9)
                lr = self.schedule.lr(self.step - 1)
                self._record("train", running / running_n, lr=lr, items_per_second=rate)
                if bar is not None:
                    bar.set_postfix(loss=f"{running / running_n:.4f}")
                running, running_n, window_items, window_time = 0.0, 0, 0, 0.0
            if bar is not None:
                bar.update(1)
            if self.step % t.eval_interval == 0 or self.step == t.max_steps:
                self._periodic_evaluation()
        if bar is not None:
            bar.close()
        return self.finish()

    def evaluate(self, split: str) -> dict[str, float]:
        """The task metrics of ``split`` (valid | test) for the current weights."""
        was_training = self.model.training
        self.model.eval()
        try:
            with autocast_context(self.device, self.config.train.precision):
                return self.task.evaluate(self.model, split)
        finally:
            self.model.train(was_training)

    def finish(self) -> dict[str, Any]:
        """Evaluate the best weights on valid and test; write ``results.json``."""
        best = self.out_dir / "best"
        if (best / ckpt.MODEL_FILE).is_file():
            ckpt.load_weights(self.model, best)
        results = {
            "name": self.config.name,
            "task": self.config.task.name,
            "steps": self.step,
            "best_step": self.best_step,
            "train_seconds": self.elapsed,
            "train_items": self.items,
            "items_per_second": self.items / max(self.elapsed, 1e-9),
            "parameters": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            "valid": self.evaluate("valid"),
            "test": self.evaluate("test"),
        }
        (self.out_dir / RESULTS_FILE).write_text(json.dumps(results, indent=2), encoding="utf-8")
        return results

    # ------------------------------------------------------------------ steps

    def _train_step(self, batch: Any) -> tuple[float, int]:
        t = self.config.train
        set_lr(self.optimizer, self.schedule.lr(self.step))
        with autocast_context(self.device, t.precision):
            loss, count = self.task.loss(self.model, batch)
        value = float(loss.detach())
        check_finite(value, self.step + 1, self.out_dir / "checkpoint")
        apply_gradients(loss, self.model, self.optimizer, t.clip)
        return value, count

    def _periodic_evaluation(self) -> None:
        metrics = self.evaluate("valid")
        loss = float(metrics["loss"])
        annealed = self.schedule.observe_validation(loss)
        extra = {k: v for k, v in metrics.items() if k != "loss"}
        self._record("valid", loss, lr=self.schedule.lr(self.step), **extra)
        if annealed:
            self.log(f"validation stalled: learning rate annealed at step {self.step}")
        if loss < self.best_valid:
            self.best_valid, self.best_step = loss, self.step
            save_task_checkpoint(self.out_dir / "best", self.model, self.config)
        save_task_checkpoint(self.out_dir / "checkpoint", self.model, self.config)

    def _record(self, split: str, loss: float, **extra: Any) -> None:
        record = {"step": self.step, "split": split, "loss": loss, "time": self.elapsed, **extra}
        with open(self.out_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if split == "valid":
            shown = ", ".join(
                f"{k} {v:.4f}" for k, v in extra.items() if k != "lr" and isinstance(v, float)
            )
            self.log(f"step {self.step}: valid loss {loss:.4f}" + (f" ({shown})" if shown else ""))

    def _progress_bar(self):
        if not self.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(
            total=self.config.train.max_steps,
            desc=f"{self.config.name} ({self.config.task.name})",
            unit="step",
            dynamic_ncols=True,
        )


def run_task(
    config: Config,
    out_dir: str | Path,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Train and evaluate ``config`` on ``config.task.name``; return the results.

    ``lm`` runs the language-model trainer; ``music``, ``pixels``, ``copy``, ``adding`` and
    ``seq2seq`` run :class:`TaskRun`. Writes ``metrics.jsonl``, ``results.json``,
    ``checkpoint/`` and ``best/`` into ``out_dir``.
    """
    if config.task.name == "lm":
        return train(config, out_dir, overwrite=overwrite, progress=progress, log=log)
    with own_run_folder(out_dir, overwrite=overwrite, log=log):
        return TaskRun(config, out_dir, progress=progress, log=log).fit()
