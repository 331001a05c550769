"""Did a run learn? Its validation loss against the task's trivial baselines.

A model whose validation loss is not clearly below the best of the task's cheap trivial
models (:meth:`Task.trivial_losses`: unigram / bigram for a language model, the per-note
frequency and previous-step models for music, the class prior for pixels, a memoryless
copier, the constant 1 for the adding problem) has learned nothing a count table does not
hold, and comparing it with another run measures noise. "Clearly" is :data:`MARGIN`: the loss
must be at least 1% of the baseline's loss below it (a run at the unigram plateau sits within
0.1% of it; a run that learned, tens of percent below).

The check is written into ``results.json`` (``learned``) at the end of training, and the
trainer, ``highway report``, ``highway ab`` and ``highway compare`` repeat its warning.
"""

from __future__ import annotations

from typing import Any

#: The share of the best baseline's loss a run must be below it by to count as learned.
MARGIN = 0.01

#: The trivial models the check reads, by the names the tasks' ``baselines`` give them (the
#: report's lines to beat hold more: trigram, 1-NN, logistic regression).
FLOOR_MODELS = (
    "unigram", "bigram", "frequency", "previous step", "class prior", "memoryless", "constant 1"
)  # fmt: skip


def learning_check(loss: float, baselines: dict[str, float]) -> dict[str, Any] | None:
    """``{baseline, baseline_loss, loss, gap, learned, margin, baselines}`` for a validation
    ``loss`` against the trivial ``baselines`` (same unit); None without baselines."""
    if not baselines:
        return None
    name = min(baselines, key=lambda k: baselines[k])
    floor = baselines[name]
    gap = floor - loss  # positive: below the baseline
    return {
        "baseline": name,
        "baseline_loss": floor,
        "loss": loss,
        "gap": gap,
        "learned": gap > MARGIN * abs(floor),
        "margin": MARGIN,
        "baselines": dict(baselines),
    }


def plateau_warning(
    check: dict[str, Any] | None, run: str = "the run", scale: float = 1.0, unit: str = "nats"
) -> str | None:
    """One line saying that ``run`` did not learn beyond its best trivial baseline, or None;
    losses shown as ``loss * scale`` in ``unit`` (bits: ``1 / ln 2``)."""
    if not check or check["learned"]:
        return None
    return (
        f"warning: {run} did not learn beyond the trivial baselines: validation "
        f"{check['loss'] * scale:.4f} {unit} against the {check['baseline']} model's "
        f"{check['baseline_loss'] * scale:.4f} (a run that learned is at least "
        f"{check['margin']:.0%} below it); comparisons with it measure noise: check the "
        "learning rate, the initialisation (model.init=torch) and the budget"
    )


def floor_losses(models: dict[str, dict[str, dict[str, float]]], split: str) -> dict[str, float]:
    """The :data:`FLOOR_MODELS` losses on ``split`` among a task's ``baselines()``."""
    return {
        name: by[split]["loss"]
        for name, by in models.items()
        if name in FLOOR_MODELS and by.get(split, {}).get("loss") is not None
    }
