"""The numbers of a report: the paper-format rows, paired statistics, steps to targets,
time per row and the paper's direction, from the runs grouped by row."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..experiments.registry import Contrast
from .convergence import steps_to_reach
from .machines import one_kind_of_machine
from .runs import RunRecord
from .stats import (
    PERCENT_METRICS,
    fraction_target,
    higher_is_better,
    mean,
    means_on_shared_seeds,
    paired_difference,
    plateaued,
    relative_change,
    seeds_better,
    steps_to_fraction,
    summary,
)


def _mean(s: dict[str, float] | None) -> float | None:
    """The mean of a :func:`~.stats.summary` (None: no values)."""
    return None if s is None else s["mean"]


def _improved(change: float | None, metric: str) -> bool | None:
    if change is None:
        return None
    return change > 0 if higher_is_better(metric) else change < 0


def _result(run: RunRecord, split: str, key: str) -> float | None:
    value = (run.results or {}).get(split, {}).get(key)
    if value is None:
        return None
    return float(value) * (100 if key in PERCENT_METRICS else 1)


def _values_by_step(
    runs: list[RunRecord], split: str, key: str
) -> dict[int, list[tuple[float, float]]]:
    """``{step: [(seconds, value), ...]}``: one entry per seed that logged ``key`` at the step
    (a last partial training interval left out)."""
    by_step: dict[int, list[tuple[float, float]]] = {}
    for run in runs:
        per_run = {
            int(r["step"]): (float(r.get("time", math.nan)), float(r[key]))
            for r in run.records
            if r.get("split") == split and key in r and not _partial_interval(run, r)
        }
        for step, point in per_run.items():
            by_step.setdefault(step, []).append(point)
    return dict(sorted(by_step.items()))


def mean_curve(runs: list[RunRecord], split: str, key: str) -> list[tuple[int, float, float]]:
    """``(step, mean seconds, mean value)`` over the seeds that logged each step."""
    return [
        (step, float(np.mean([p[0] for p in pts])), float(np.mean([p[1] for p in pts])))
        for step, pts in _values_by_step(runs, split, key).items()
    ]


def seed_band(runs: list[RunRecord], split: str, key: str) -> list[tuple[int, float, float, float]]:
    """``(step, mean seconds, lowest, highest value)`` over the seeds, at the steps two or more
    seeds logged: the spread a figure draws around :func:`mean_curve`."""
    return [
        (step, float(np.mean([p[0] for p in pts])), min(p[1] for p in pts), max(p[1] for p in pts))
        for step, pts in _values_by_step(runs, split, key).items()
        if len(pts) > 1
    ]


def _partial_interval(run: RunRecord, record: dict[str, Any]) -> bool:
    """A training record averaging fewer than ``log_interval`` steps (the run's last one when
    ``max_steps`` is no multiple of it): left out of curves, where it would end them with a jump."""
    interval = run.config.get("train", {}).get("log_interval")
    return record.get("split") == "train" and bool(interval) and int(record["step"]) % interval != 0


def paper_rows(groups: dict[str, list[RunRecord]], metric: str) -> list[dict[str, Any]]:
    """The paper-format table: eval/test loss and metric, change vs baseline, published."""
    rows = {}
    for name, runs in groups.items():
        exp = runs[0].experiment
        rows[name] = {
            "name": name,
            "row": exp.get("row", name),
            "baseline": exp.get("baseline", name),
            "is_baseline": exp.get("baseline", name) == name,
            "seeds": [r.seed for r in runs],
            "parameters": mean((r.results or {}).get("parameters") for r in runs),
            "eval_loss": summary(_result(r, "valid", "loss") for r in runs),
            f"eval_{metric}": summary(_result(r, "valid", metric) for r in runs),
            "test_loss": summary(_result(r, "test", "loss") for r in runs),
            f"test_{metric}": summary(_result(r, "test", metric) for r in runs),
            "published": dict(exp.get("published", {})),
            "protocols": dict(exp.get("protocols", {})),
            f"eval_{metric}_paper_protocol": summary(
                (r.protocol or {}).get("valid", {}).get(metric) for r in runs
            ),
            "per_seed": _per_seed(runs, metric),
        }
    for row in rows.values():
        base = rows.get(row["baseline"])
        for split in ("eval", "test"):
            key = f"{split}_{metric}"
            row[f"{key}_paired"] = (
                None if row["is_baseline"] or base is None
                else paired_difference(_by_seed(row, key), _by_seed(base, key))
            )  # fmt: skip
            mine, theirs = _means_on_shared_seeds(row, base, key)
            change = None if row["is_baseline"] else relative_change(mine, theirs)
            row[f"{key}_change_pct"] = change
            row[f"{key}_improved"] = _improved(change, metric)
            paper_base = base["published"].get(key) if base else None
            paper = None if row["is_baseline"] else row["published"].get(key)
            row[f"published_{key}_change_pct"] = relative_change(paper, paper_base)
    return list(rows.values())


def contrast_rows(
    rows: list[dict[str, Any]], contrasts: Iterable[Contrast], metric: str
) -> list[dict[str, Any]]:
    """Each registered claim that sets a row against another row (not the baseline): ``row -
    other`` paired by seed on eval and test, with the published difference where both rows
    have one. A claim whose rows did not both run is left out."""
    by_name = {r["name"]: r for r in rows}
    out = []
    for contrast in contrasts:
        row, other = by_name.get(contrast.row), by_name.get(contrast.other)
        if row is None or other is None:
            continue
        entry: dict[str, Any] = {"claim": contrast.claim, "row": row["name"],
                                 "other": other["name"]}  # fmt: skip
        for split in ("eval", "test"):
            key = f"{split}_{metric}"
            entry[f"{key}_paired"] = paired_difference(_by_seed(row, key), _by_seed(other, key))
            mine, theirs = row["published"].get(key), other["published"].get(key)
            entry[f"published_{key}_difference"] = (
                None if mine is None or theirs is None else mine - theirs
            )
        out.append(entry)
    return out


def _per_seed(runs: list[RunRecord], metric: str) -> dict[str, dict[str, float | None]]:
    """Final valid/test values of each seed (``report.json`` keeps them for re-analysis)."""
    return {
        str(r.seed): {
            "eval_loss": _result(r, "valid", "loss"),
            f"eval_{metric}": _result(r, "valid", metric),
            "test_loss": _result(r, "test", "loss"),
            f"test_{metric}": _result(r, "test", metric),
        }
        for r in runs
    }


def _by_seed(row: dict[str, Any], key: str) -> dict[int, float | None]:
    return {int(seed): values.get(key) for seed, values in row["per_seed"].items()}


def _means_on_shared_seeds(
    row: dict[str, Any], base: dict[str, Any] | None, key: str
) -> tuple[float | None, float | None]:
    """Means of ``row`` and its baseline over the seeds both have a value for
    (:func:`~.stats.means_on_shared_seeds`)."""
    if base is None:
        return _mean(row[key]), None
    return means_on_shared_seeds(_by_seed(row, key), _by_seed(base, key))


def fraction_rows(
    groups: dict[str, list[RunRecord]], baseline: str | None, fractions: tuple[float, ...]
) -> dict[str, Any]:
    """Validation steps each row needs to cover fractions of the baseline's improvement."""
    if baseline is None or baseline not in groups:
        return {"skipped": f"the baseline row {baseline} is not among the runs"}
    base_curve = [(s, v) for s, _, v in mean_curve(groups[baseline], "valid", "loss")]
    if not base_curve:
        return {"skipped": f"the baseline row {baseline} logged no valid loss"}
    base_steps = {f: steps_to_fraction(base_curve, base_curve, f) for f in fractions}
    rows = []
    for name, runs in groups.items():
        curve = [(s, v) for s, _, v in mean_curve(runs, "valid", "loss")]
        steps = {f: steps_to_fraction(curve, base_curve, f) for f in fractions}
        rows.append(
            {
                "name": name,
                "steps": {str(f): steps[f] for f in fractions},
                "ratio": {
                    str(f): None
                    if steps[f] is None or not base_steps[f]
                    else steps[f] / base_steps[f]
                    for f in fractions
                },  # fmt: skip
            }
        )
    return {
        "baseline": baseline,
        "fractions": list(fractions),
        "targets": {str(f): fraction_target(base_curve, f) for f in fractions},
        "baseline_plateaued": plateaued(base_curve),
        "rows": rows,
    }


def acceleration_rows(
    groups: dict[str, list[RunRecord]], split: str, baseline: str | None, timed: bool = True
) -> dict[str, Any]:
    """Steps / seconds to reach the baseline's best ``split`` loss, and ratio to its steps
    (``timed=False``: no seconds, the runs trained on different machines)."""
    if baseline is None or baseline not in groups:
        return {"skipped": f"the baseline row {baseline} is not among the runs"}
    base_curve = [(s, v) for s, _, v in mean_curve(groups[baseline], split, "loss")]
    if not base_curve:
        return {"skipped": f"the baseline row {baseline} logged no {split} loss"}
    target = min(v for _, v in base_curve)
    base_steps = steps_to_reach(base_curve, target)
    rows = []
    for name, runs in groups.items():
        points = mean_curve(runs, split, "loss")
        reached = steps_to_reach([(s, v) for s, _, v in points], target)
        seconds = next((t for s, t, _ in points if s == reached), None) if timed else None
        rows.append(
            {
                "name": name,
                "best_loss": min((v for _, _, v in points), default=None),
                "steps_to_target": reached,
                "seconds_to_target": seconds,
                "ratio_to_baseline_steps": None
                if reached is None or not base_steps
                else reached / base_steps,
            }
        )
    return {"target_loss": target, "baseline": baseline, "baseline_steps": base_steps,
            "rows": rows}  # fmt: skip


def time_rows(groups: dict[str, list[RunRecord]], timed: bool = True) -> list[dict[str, Any]]:
    """Training time, seconds per step and parameters per row (HT Table 7 style); a row's
    seconds only when its own runs trained on one kind of machine (a mean over an AVX2 and an
    AVX512 run measures neither), its change to its baseline only when ``timed`` (all did)."""
    rows = {}
    for name, runs in groups.items():
        done = [r.results for r in runs if r.results]
        timed_runs = done if one_kind_of_machine(done) else []
        seconds = summary(r.get("train_seconds") for r in timed_runs)
        exp = runs[0].experiment
        rows[name] = {
            "name": name,
            "baseline": exp.get("baseline", name),
            "parameters": mean(r.get("parameters") for r in done),
            "steps": mean(r.get("steps") for r in done),
            "train_seconds": seconds,
            "train_hours": None if seconds is None else seconds["mean"] / 3600,
            "seconds_per_step": summary(
                r["train_seconds"] / r["steps"] for r in timed_runs if r.get("steps")
            ),
            "published_train_hours": exp.get("published", {}).get("train_hours"),
        }
    for row in rows.values():
        base = rows.get(row["baseline"])
        own = row["baseline"] == row["name"]
        row["time_change_pct"] = (
            None if own or base is None or not timed
            else relative_change(_mean(row["train_seconds"]), _mean(base["train_seconds"]))
        )  # fmt: skip
        row["published_time_change_pct"] = (
            None if own or base is None
            else relative_change(row["published_train_hours"], base["published_train_hours"])
        )  # fmt: skip
    return list(rows.values())


def _paired_better(runs: list[RunRecord], base: list[RunRecord], metric: str) -> tuple[int, int]:
    """Seeds run by both rows where the row's final validation metric is better: (better, n)."""
    mine = {r.seed: _result(r, "valid", metric) for r in runs}
    theirs = {r.seed: _result(r, "valid", metric) for r in base}
    return seeds_better(mine, theirs, metric)


def direction_rows(
    groups: dict[str, list[RunRecord]],
    paper_table: list[dict[str, Any]],
    acceleration: dict[str, Any],
    metric: str,
) -> list[dict[str, Any]]:
    """Per gated row: faster to the baseline's best, better at equal steps, paper's sign."""
    rows = []
    accel = {r["name"]: r for r in acceleration.get("rows", [])}
    base_steps = acceleration.get("baseline_steps")
    base_seconds = accel.get(acceleration.get("baseline"), {}).get("seconds_to_target")
    for row in paper_table:
        if row["is_baseline"] or row["baseline"] not in groups:
            continue
        name, key = row["name"], f"eval_{metric}"
        reached = accel.get(name, {}).get("steps_to_target")
        seconds = accel.get(name, {}).get("seconds_to_target")
        faster = None if not base_steps else reached is not None and reached < base_steps
        sooner = None if base_seconds is None else seconds is not None and seconds < base_seconds
        better, n_paired = _paired_better(groups[name], groups[row["baseline"]], metric)
        paper_change = row[f"published_{key}_change_pct"]
        paper_better = _improved(paper_change, metric)
        improved = row[f"{key}_improved"]
        rows.append(
            {
                "name": name,
                "param_matched": bool(groups[name][0].experiment.get("match_params_of")),
                "steps_to_baseline_best": reached,
                "baseline_steps": base_steps,
                "converges_faster": faster,
                "seconds_to_baseline_best": seconds,
                "baseline_seconds": base_seconds,
                "converges_sooner_in_time": sooner,
                "eval_change_pct": row[f"{key}_change_pct"],
                "better_at_equal_steps": improved,
                "seeds_better": better,
                "seeds_paired": n_paired,
                "paper_eval_change_pct": paper_change,
                "paper_better": paper_better,
                "same_sign_as_paper": None
                if paper_better is None or improved is None
                else improved == paper_better,
            }
        )
    return rows
