"""Statistics over seeds: spread, paired differences with t-intervals, steps to a fraction.

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

import numpy as np

from .convergence import steps_to_reach

#: Fractions of the baseline's improvement the report reads steps at.
FRACTIONS = (0.5, 0.8, 0.9, 0.95)


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
