"""Validation-annealed learning rates in a report (``train.schedule=anneal``: the RT word and
music scripts cut the rate when validation stalls).

Two runs that anneal at different steps differ in their rate as well as their model from
then on, so a final value can reward the run whose plateau came first (and got the smaller
rate sooner). The report therefore says where each run's rate changed, and sets every row
against its baseline once more at the last periodic validation before either run of a seed's
pair annealed: there the two differ in their model alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .stats import paired_difference, relative_change

if TYPE_CHECKING:  # runs.py imports this module for run_facts
    from .runs import RunRecord


def rate_changes(run: RunRecord) -> list[dict[str, float]] | None:
    """Where a validation-driven schedule changed the learning rate, as ``[{"step", "from",
    "to"}]`` in order; None for the other schedules, whose rate follows the step alone and so
    is the same in every row."""
    if run.config.get("train", {}).get("schedule") != "anneal":
        return None
    changes: list[dict[str, float]] = []
    previous: float | None = None
    for record in run.records:  # in the order written: a record's lr is the rate after it
        lr = record.get("lr")
        if lr is None:
            continue
        if previous is not None and lr != previous:
            changes.append({"step": record["step"], "from": previous, "to": lr})
        previous = lr
    return changes


def _validations(run: RunRecord, metric: str) -> dict[int, dict[str, Any]]:
    return {int(r["step"]): r for r in run.records if r.get("split") == "valid" and metric in r}


def _before_either_annealed(
    run: RunRecord, base: RunRecord, first_change: dict[int, float], metric: str
) -> dict[str, Any] | None:
    """Both runs' ``metric`` at the last validation both logged before the first rate change
    of either (``first_change`` by ``id(run)``). Not at that change's own validation: the
    annealing rule fires on a stalled one, so it is by construction a poor point of the run
    that annealed."""
    mine, theirs = _validations(run, metric), _validations(base, metric)
    limit = min(first_change[id(run)], first_change[id(base)])
    shared = [step for step in mine if step in theirs and step < limit]
    if not shared:
        return None
    step = max(shared)
    return {
        "step": step,
        "row": float(mine[step][metric]),
        "baseline": float(theirs[step][metric]),
        "tokens": mine[step].get("tokens"),
        "annealed": limit != float("inf"),
    }


def before_annealing(
    groups: dict[str, list[RunRecord]], paper_table: list[dict[str, Any]], metric: str
) -> dict[str, Any] | None:
    """Each row against its baseline, seed by seed, at the last periodic validation before
    either run annealed; None when no run's rate is annealed on validation."""
    changes = {id(run): rate_changes(run) for runs in groups.values() for run in runs}
    if all(c is None for c in changes.values()):
        return None
    first_change = {key: c[0]["step"] if c else float("inf") for key, c in changes.items()}
    rows = []
    for row in paper_table:
        if row["is_baseline"] or row["baseline"] not in groups:
            continue
        base = {run.seed: run for run in groups[row["baseline"]]}
        points: dict[int, dict[str, Any]] = {}
        for run in groups[row["name"]]:
            other = base.get(run.seed)
            point = other and _before_either_annealed(run, other, first_change, metric)
            if point:
                points[run.seed] = point
        mine = {seed: p["row"] for seed, p in points.items()}
        theirs = {seed: p["baseline"] for seed, p in points.items()}
        change = None
        if points:
            change = relative_change(np.mean([*mine.values()]), np.mean([*theirs.values()]))
        rows.append(
            {
                "name": row["name"],
                "baseline": row["baseline"],
                "per_seed": {str(seed): p for seed, p in sorted(points.items())},
                "paired": paired_difference(mine, theirs),
                "change_pct": None if change is None else float(change),
            }
        )
    return {"metric": metric, "rows": rows}
