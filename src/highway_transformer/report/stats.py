"""The statistics every report view reads: spread over seeds, paired differences with
t-intervals, the difference of two scored evaluations, steps to a fraction, and the learning
check that withholds a verdict.

``highway report`` (its tables and verdicts), the A/B summary and the demo page (views of
the report's values) and ``highway compare`` (one seed a row) all compute with these
functions, on the runs :mod:`.runs` read.

Rows of a table share their seeds (seed ``N`` of every row starts from the same data order), so
a row is compared with its baseline *paired by seed*: the per-seed differences
``row - baseline`` carry the comparison, and their Student-t interval says whether it is
larger than the seed spread. Convergence is measured on validation curves as the steps a row
needs to cover a fraction of the baseline's own improvement (its first logged value to its
best): unlike "steps to the baseline's best" this does not collapse to the last step when the
baseline is still improving at the end of its budget.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .convergence import steps_to_reach

#: Fractions of the baseline's improvement the report reads steps at.
FRACTIONS = (0.5, 0.8, 0.9, 0.95)
#: Metrics the papers publish in percent (results.json holds fractions; success: the rl task's).
PERCENT_METRICS = ("accuracy", "token_accuracy", "exact_match", "success")
#: Two scores closer than this many standard errors of their difference are a tie.
Z95 = 1.96
#: The keys a task's evaluation counts what it scored by, and what they count.
COUNT_NAMES = {"tokens": "tokens", "steps": "time steps", "examples": "examples"}


def higher_is_better(metric: str) -> bool:
    """Whether a larger ``metric`` is better, as the task registry declares it."""
    from ..tasks import TASKS  # the tasks import torch: only once a verdict is read

    return any(task.metrics.get(metric) == "higher" for task in TASKS.values())


def better_word(metric: str) -> str:
    """ "higher" or "lower": the better direction of ``metric`` (the task registry's word)."""
    return "higher" if higher_is_better(metric) else "lower"


def relative_change(value: float | None, base: float | None) -> float | None:
    """``(value - base) / base`` in percent; None when either is unknown."""
    if value is None or base is None or base == 0:
        return None
    return (value - base) / base * 100.0


def summary(values: Iterable[float | None]) -> dict[str, float] | None:
    """Mean, sample standard deviation (0 for one value) and count; None for no values."""
    data = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not data:
        return None
    std = float(np.std(data, ddof=1)) if len(data) > 1 else 0.0
    return {"mean": float(np.mean(data)), "std": std, "n": len(data)}


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the finite values (:func:`summary`); None for none."""
    found = summary(values)
    return None if found is None else found["mean"]


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Two-sided Student-t interval of the mean of ``values``; None below two values."""
    if len(values) < 2:
        return None
    from scipy import stats as scipy_stats

    mean = float(np.mean(values))
    sem = float(np.std(values, ddof=1)) / math.sqrt(len(values))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sem
    return mean - half, mean + half


def shared_seeds(
    row: Mapping[int, float | None], baseline: Mapping[int, float | None]
) -> list[int]:
    """The seeds, in order, for which both ``row`` and ``baseline`` have a value."""
    return sorted(s for s, v in row.items() if v is not None and baseline.get(s) is not None)


def means_on_shared_seeds(
    row: Mapping[int, float | None], baseline: Mapping[int, float | None]
) -> tuple[float | None, float | None]:
    """Means of ``row`` and ``baseline`` over the seeds both have a value for: a row with a
    seed its baseline lacks (a table stopped part-way) is compared like with like."""
    shared = shared_seeds(row, baseline)
    if not shared:
        return None, None
    return (
        float(np.mean([row[s] for s in shared])),
        float(np.mean([baseline[s] for s in shared])),
    )


def seeds_better(
    row: Mapping[int, float | None], baseline: Mapping[int, float | None], metric: str
) -> tuple[int, int]:
    """How many seeds both ran ``row`` scored better than ``baseline`` on: (better, paired)."""
    seeds = shared_seeds(row, baseline)
    higher = higher_is_better(metric)
    pairs = [(float(row[s]), float(baseline[s])) for s in seeds]  # type: ignore[arg-type]
    return sum(mine > theirs if higher else mine < theirs for mine, theirs in pairs), len(pairs)


def paired_difference(
    row: Mapping[int, float | None],
    baseline: Mapping[int, float | None],
    confidence: float = 0.95,
) -> dict[str, object] | None:
    """``row - baseline`` over the seeds both ran: per seed, mean, std, t-interval, verdict.

    ``verdict`` is ``lower`` / ``higher`` when the interval excludes 0, ``unresolved`` when it
    contains 0, None with fewer than two paired seeds (no interval). None without pairs.
    """
    seeds = shared_seeds(row, baseline)
    pairs = {s: float(row[s]) - float(baseline[s]) for s in seeds}  # type: ignore[arg-type]
    if not pairs:
        return None
    diffs = list(pairs.values())
    interval = t_interval(diffs, confidence)
    verdict = None
    if interval is not None:
        verdict = "lower" if interval[1] < 0 else "higher" if interval[0] > 0 else "unresolved"
    return {
        "per_seed": {str(s): d for s, d in pairs.items()},
        "mean": float(np.mean(diffs)),
        "std": float(np.std(diffs, ddof=1)) if len(diffs) > 1 else 0.0,
        "n": len(diffs),
        "confidence": confidence,
        "interval": None if interval is None else list(interval),
        "verdict": verdict,
    }


def fraction_target(baseline: Sequence[tuple[int, float]], fraction: float) -> float | None:
    """The loss at which ``fraction`` of the baseline's improvement (first value to best)
    is done."""
    if not baseline:
        return None
    start = baseline[0][1]
    best = min(v for _, v in baseline)
    return start - fraction * (start - best)


def steps_to_fraction(
    curve: Sequence[tuple[int, float]],
    baseline: Sequence[tuple[int, float]],
    fraction: float,
) -> int | None:
    """First step of ``curve`` at or below :func:`fraction_target`; None if never reached."""
    target = fraction_target(baseline, fraction)
    return None if target is None else steps_to_reach(list(curve), target)


def plateaued(
    curve: Sequence[tuple[int, float]], tail: float = 0.2, tolerance: float = 0.02
) -> bool:
    """Whether the last ``tail`` of the steps improved the best by under ``tolerance`` of the
    whole improvement (a still-falling baseline makes "steps to its best" its last step)."""
    if len(curve) < 3:
        return False
    start, last_step = curve[0][1], curve[-1][0]
    cut = curve[0][0] + (1 - tail) * (last_step - curve[0][0])
    before = min(v for s, v in curve if s <= cut)
    best = min(v for _, v in curve)
    total = start - best
    return total > 0 and (before - best) < tolerance * total


def difference(a: float, a_se: float | None, b: float, b_se: float | None) -> dict[str, Any]:
    """``a - b`` with the standard error of the difference of two independent scores and
    whether it is a tie (within :data:`Z95` of it); ``tie`` None where a score has none."""
    diff = a - b
    if a_se is None or b_se is None:
        return {"difference": diff, "se": None, "tie": None}
    se = math.hypot(a_se, b_se)
    return {"difference": diff, "se": se, "tie": abs(diff) <= Z95 * se}


def best_periodic(records: list[dict[str, Any]]) -> tuple[float, float | None]:
    """The best periodic validation loss and its standard error (None where not recorded)."""
    valid = [r for r in records if r.get("split") == "valid" and "loss" in r]
    best = min(valid, key=lambda r: float(r["loss"]))
    return float(best["loss"]), best.get("loss_se")


def scored_count(metrics: dict[str, Any] | None) -> int | None:
    """How many tokens (steps, examples) a score averaged over, where it says."""
    for key in COUNT_NAMES:
        if metrics and key in metrics:
            return int(metrics[key])
    return None


def count_name(metrics: dict[str, Any] | None) -> str:
    """What :func:`scored_count` counts in ``metrics``."""
    return next((name for key, name in COUNT_NAMES.items() if metrics and key in metrics), "items")


def learned_check(
    results: dict[str, Any] | None, models: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """A run's check against the trivial models (:func:`~..tasks.floor.best_check`): as the
    trainer recorded it in ``results``, against ``models`` too (a report's lines to beat)."""
    from ..tasks.floor import best_check  # the tasks import torch: after the inputs' checks

    results = results or {}
    valid = results.get("valid") or {}
    return best_check(valid.get("loss"), results.get("learned"), models)


def withhold_verdicts(
    primary: dict[str, Any], learning: list[dict[str, Any]], metric: str, label: str
) -> None:
    """No verdict for a registered pair with a run that did not learn (:func:`withheld_reason`,
    losses in the report's ``metric``); the interval stays, as a description, and a pair that
    has no verdict anyway (one seed) keeps saying why."""
    from ..tasks.floor import metric_unit, withheld_reason

    checks: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
    for r in learning:
        short = str(r["name"]).split("/", 1)[-1]
        checks.setdefault(r["name"], []).append((f"{short} seed {r['seed']}", r["check"]))
    scale, unit = metric_unit(metric, label)
    for row in primary["rows"]:
        runs = [*checks.get(row["against"], []), *checks.get(row["row"], [])]
        reason = withheld_reason(runs, scale, unit)
        if reason is not None and (row["paired"] or {}).get("verdict") is not None:
            row["verdict_if_learned"], row["verdict"] = row["verdict"], reason
