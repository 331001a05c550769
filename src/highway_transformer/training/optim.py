"""Optimisers and learning-rate schedules of the papers.

* SGD with linear decay (HT A.1, char PTB), SGD annealed when validation stalls (HT A.2
  says "annealed"; rule ``best``: x factor after ``anneal_patience + 1`` evaluations without
  a new best; rule ``window``, the RT code's language_word/experiment.py: halve when a
  validation is no better than the worst of the previous 5, after epoch 5; ``window-strict``,
  its language_char/experiment.py: lr / 10 when worse than the worst of the previous 3,
  after epoch 5), Adam with
  optional linear warm-up and cosine decay (Transformer-XL, HT A.3), and the ``step``
  schedule: x factor every ``lr_step`` steps (the RT code's image/experiment.py: lr / 10 every
  10 epochs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..config import TrainConfig
from ..errors import ConfigError


def build_optimizer(params: Iterable[nn.Parameter], config: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    kind = torch.optim.Adam if config.optimizer == "adam" else torch.optim.AdamW
    # fused: one kernel for the whole update (params must already be on their device)
    extra = {"fused": True} if config.fused_optimizer else {}
    try:
        return kind(
            params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay, **extra
        )
    except RuntimeError as exc:
        raise ConfigError(
            f"train.fused_optimizer is not supported here ({str(exc).splitlines()[0][:120]}); "
            "leave it off"
        ) from None


class LRSchedule:
    """Learning rate at each step; ``anneal`` also reacts to validation losses.

    State (``anneal_scale``, ``best``, ``bad_evals``, ``history``) is saved in checkpoints for
    exact resume.
    """

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.anneal_scale = 1.0
        self.best = math.inf
        self.bad_evals = 0
        self.history: list[float] = []  # the last anneal_window validations (rule "window")
        self.evaluations = 0  # validations observed (rule "window": the RT code's epochs)

    def lr(self, step: int) -> float:
        """The learning rate for 0-based ``step``."""
        c = self.config
        if c.warmup_steps and step < c.warmup_steps:
            return c.lr * (step + 1) / c.warmup_steps
        progress = (step - c.warmup_steps) / max(1, c.max_steps - c.warmup_steps)
        progress = min(max(progress, 0.0), 1.0)
        if c.schedule == "linear":
            return c.min_lr + (c.lr - c.min_lr) * (1.0 - progress)
        if c.schedule == "cosine":
            return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + math.cos(math.pi * progress))
        if c.schedule == "anneal":
            return max(c.lr * self.anneal_scale, c.min_lr)
        if c.schedule == "step":
            return max(c.lr * c.anneal_factor ** (step // c.lr_step), c.min_lr)
        return c.lr

    def observe_validation(self, loss: float) -> bool:
        """Record a validation loss; return True when the rate was annealed."""
        c = self.config
        stalled = None if c.anneal_rule == "best" else self._window_stalled(loss)
        if loss < self.best:
            self.best, self.bad_evals = loss, 0
        else:
            self.bad_evals += 1
        if stalled is None:
            stalled = self.bad_evals > c.anneal_patience
        if c.schedule == "anneal" and stalled:
            self.anneal_scale *= c.anneal_factor
            self.bad_evals = 0
            return True
        return False

    def _window_stalled(self, loss: float) -> bool:
        c = self.config
        seen = self.evaluations
        worst = max(self.history, default=math.inf)
        worse = loss > worst if c.anneal_rule == "window-strict" else loss >= worst
        stalled = seen >= c.anneal_after and worse
        self.history = [*self.history, loss][-c.anneal_window :]
        self.evaluations = seen + 1
        return stalled

    def state_dict(self) -> dict[str, object]:
        return {"anneal_scale": self.anneal_scale, "best": self.best, "bad_evals": self.bad_evals,
                "history": list(self.history), "evaluations": self.evaluations}  # fmt: skip

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.anneal_scale = float(state["anneal_scale"])  # type: ignore[arg-type]
        self.best = float(state["best"])  # type: ignore[arg-type]
        self.bad_evals = int(state["bad_evals"])  # type: ignore[call-overload]
        # Checkpoints written before the window rule existed hold no history.
        self.history = [float(v) for v in state.get("history", [])]  # type: ignore[attr-defined]
        self.evaluations = int(state.get("evaluations", 0))  # type: ignore[call-overload]


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
