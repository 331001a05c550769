"""Did a run learn? Its validation loss against the task's trivial baselines.

A model whose validation loss is not clearly below the best of the task's cheap trivial
models (:meth:`Task.trivial_losses`: unigram / bigram for a language model, the per-note
frequency and previous-step models for music, the class prior for pixels, a memoryless
copier, the constant 1 for the adding problem) has learned nothing a count table does not
hold, and comparing it with another run measures noise. "Clearly" is :data:`MARGIN`: the loss
must be at least 1% of the baseline's loss below it (a run at the unigram plateau sits within
0.1% of it; a run that learned, tens of percent below).

The check is written into ``results.json`` (``learned``) at the end of training, and the
trainer, ``highway report``, ``highway ab`` and ``highway compare`` repeat its warning. The
three commands that compare runs decide with :func:`withheld_reason`: a comparison with a row
that did not learn gets no verdict (a difference between two count tables is noise), and
:func:`best_check` checks each run against every trivial model they have (the report's lines to
beat add the trigram and logistic regression to what the trainer recorded).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: The share of the best baseline's loss a run must be below it by to count as learned.
MARGIN = 0.01

#: How a loss (nats) is shown in a summary's metric: ``(convert, unit)`` by metric key; a
#: metric missing here (an accuracy) leaves the loss in nats.
METRIC_UNITS: dict[str, tuple[Callable[[float], float], str]] = {
    "bpc": (lambda nats: nats / math.log(2), "bpc"),
    "ppl": (lambda nats: math.exp(min(nats, 700.0)), "perplexity"),
    "nll": (lambda nats: nats, "nats"),
    "loss": (lambda nats: nats, "nats"),
    # the rl task's loss is minus the mean return of its greedy episodes: shown as the return
    "success": (lambda loss: -loss, "return"),
}


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


Scale = float | Callable[[float], float]


def metric_unit(metric: str, label: str | None = None) -> tuple[Callable[[float], float], str]:
    """How :func:`plateau_warning` shows losses beside a summary in ``metric`` (``label``: the
    metric's name where it is not its key, ``bpb``)."""
    convert, unit = METRIC_UNITS.get(metric, METRIC_UNITS["loss"])
    return convert, (label or unit) if metric in ("bpc", "ppl") else unit


def _shown(value: float, scale: Scale) -> float:
    return scale(value) if callable(scale) else value * scale


def plateau_warning(
    check: dict[str, Any] | None,
    run: str = "the run",
    scale: Scale = 1.0,
    unit: str = "nats",
    hint: str | None = None,
) -> str | None:
    """One line saying that ``run`` did not learn beyond its best trivial baseline, or None;
    losses shown as ``loss * scale`` (or ``scale(loss)``) in ``unit`` (bits: ``1 / ln 2``);
    ``hint``: what to try, from the run's own settings (:func:`learning_hint`)."""
    if not check or check["learned"]:
        return None
    return (
        f"warning: {run} did not learn beyond the trivial baselines: validation "
        f"{_shown(check['loss'], scale):.4f} {unit} against the {check['baseline']} model's "
        f"{_shown(check['baseline_loss'], scale):.4f} (a run that learned is at least "
        f"{check['margin']:.0%} below it in loss); comparisons with it measure noise"
        + (f": {hint}" if hint else "")
    )


def _setting(config: Mapping[str, Any], key: str) -> str:
    """``train.lr=2.0``, or the key alone where the run's config does not record it."""
    return key if config.get(key) is None else f"{key}={config[key]}"


def learning_hint(config: Mapping[str, Any]) -> str:
    """What to try for a run that did not learn, named from its flattened ``config`` (the
    preset's settings as the run recorded them): the budget, the learning rate, a warm-up for
    Adam without one, and PyTorch's default initialisation only where the run did not use it."""
    task = config.get("task.name") or "lm"
    optimizer = config.get("train.optimizer") or "sgd"
    tries = [
        f"more steps ({_setting(config, 'train.max_steps')}) or a recipe known to learn the "
        f"{task} task at this budget",
        f"another learning rate ({_setting(config, 'train.lr')} with {optimizer})",
    ]
    if optimizer in ("adam", "adamw") and not config.get("train.warmup_steps"):
        tries.append("a warm-up (train.warmup_steps)")
    init = config.get("model.init") or "uniform"  # the schema's default
    if init != "torch":
        tries.append(f"model.init=torch (this run used model.init={init})")
    return "try " + "; ".join(tries)


def floor_losses(models: dict[str, dict[str, dict[str, float]]], split: str) -> dict[str, float]:
    """The losses on ``split`` of every model among a task's ``baselines()`` that has one (1-NN
    has none): the trigram and logistic regression as well as the trainer's cheap ones."""
    return {
        name: by[split]["loss"]
        for name, by in models.items()
        if by.get(split, {}).get("loss") is not None
    }


def best_check(
    loss: float | None,
    recorded: dict[str, Any] | None,
    models: dict[str, dict[str, dict[str, float]]] | None,
) -> dict[str, Any] | None:
    """The check of validation ``loss`` against every trivial model at hand: those the trainer
    ``recorded`` and the report's lines to beat (``models``, :meth:`Task.baselines`); the
    recorded check as it is where nothing is added or no loss is given."""
    extra = floor_losses(models or {}, "valid")
    if loss is None:
        loss = (recorded or {}).get("loss")
    if loss is None or not extra:
        return recorded
    return learning_check(float(loss), {**(recorded or {}).get("baselines", {}), **extra})


def _runs_named(names: list[str]) -> str:
    """``plain seeds 1, 2 and sdu seed 3``: a row's seeds named once."""
    seeds: dict[str, list[str]] = {}
    for name in names:
        row, _, seed = name.rpartition(" seed ")
        seeds.setdefault(row if row else name, []).append(seed if row else "")
    return " and ".join(
        row if found == [""] else f"{row} seed{'s' * (len(found) > 1)} {', '.join(found)}"
        for row, found in seeds.items()
    )


def withheld_reason(
    runs: Iterable[tuple[str, dict[str, Any] | None]], scale: Scale = 1.0, unit: str = "nats"
) -> str | None:
    """``withheld: plain seeds 1, 2 (4.1838–4.2001 bpc) did not beat the bigram model
    (4.1117)`` when a run of a comparison (``(name, check)`` pairs, its rows' runs) did not
    learn; None when every checked run learned. The one rule ``highway ab``, ``report`` and
    ``compare`` withhold by; losses as ``loss * scale`` (or ``scale(loss)``) in ``unit``."""
    by_model: dict[tuple[str, float], list[tuple[str, float]]] = {}
    for name, check in runs:
        if check is not None and not check["learned"]:
            key = (check["baseline"], check["baseline_loss"])
            by_model.setdefault(key, []).append((name, _shown(check["loss"], scale)))
    if not by_model:
        return None
    parts = []
    for (model, floor), stuck in by_model.items():
        low, high = min(v for _, v in stuck), max(v for _, v in stuck)
        shown = f"{low:.4f}" if len(stuck) == 1 else f"{low:.4f}–{high:.4f}"
        parts.append(
            f"{_runs_named([n for n, _ in stuck])} ({shown} {unit}) did not beat the {model} "
            f"model ({_shown(floor, scale):.4f})"
        )
    return "withheld: " + "; ".join(parts)
