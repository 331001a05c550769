"""What ``highway ab`` prints when its report is written: each row's score, the lines to beat
and one verdict line a variant, from ``report.json``'s values."""

from __future__ import annotations

from typing import Any

from ..tasks.floor import metric_unit, plateau_warning
from .markdown import format_difference
from .stats import summary
from .tables import PERCENT_METRICS

MINUS = "\u2212"
#: What an A/B of one seed says in place of intervals (``highway ab``, ``highway demo``).
ONE_SEED = "one seed: no interval and no verdict (give --seeds 2 or more; 3 by default)"


def _digits(metric: str) -> int:
    return 2 if metric in ("ppl", *PERCENT_METRICS) else 4


def _row(name: str) -> str:
    return name.split("/", 1)[-1]


def verdict_line(
    row: dict[str, Any], metric: str, split: str = "valid", label: str | None = None
) -> str:
    """``sigmoid − plain: valid bpc −0.0210 [−0.0450, +0.0030] (3 seeds): no detectable
    difference``; ``label``: the metric's name where it is not its key (``bpb``)."""
    d = _digits(metric)
    head = f"{_row(row['row'])} {MINUS} {_row(row['against'])}: {split} {label or metric}"
    paired = row["paired"]
    if paired is None:
        return f"{head}: no seed ran both rows: {row['verdict']}"
    n = paired["n"]
    shown = format_difference(paired, d, verdict=False).replace("-", MINUS)
    return f"{head} {shown} ({n} seed{'s' * (n != 1)}): {row['verdict']}"


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The A/B's scores (each row's mean over seeds at the registered checkpoint), the trivial
    models' scores (whether anything learned) and the verdicts."""
    primary = report["primary"]
    metric = report["metric"]
    label = report.get("metric_label") or metric
    if primary["comparison"] is None:
        return [f"no verdict: {primary['note']}"]
    split = primary["comparison"]["split"]
    d = _digits(metric)
    values: dict[str, dict[str, Any]] = {}
    for row in primary["rows"]:
        values.setdefault(row["against"], row["against_per_seed"])
        values.setdefault(row["row"], row["row_per_seed"])
    scores = []
    for name, per_seed in values.items():
        s = summary(per_seed.values())
        shown = (
            "—"
            if s is None
            else f"{s['mean']:.{d}f}" + (f" ± {s['std']:.{d}f}" if s["n"] > 1 else "")
        )
        scores.append(f"{_row(name)} {shown}")
    n = max((len(v) for v in values.values()), default=0)
    over = f"mean ± sd over {n} seeds" if n > 1 else "one seed"
    lines = [f"{split} {label} at the last checkpoint ({over}): " + ", ".join(scores)]
    baselines = report.get("baselines")
    if baselines is not None:
        if "not_computed" in baselines:
            lines.append(f"lines to beat: not computed ({baselines['not_computed']})")
        else:
            factor = 100.0 if metric in PERCENT_METRICS else 1.0
            found = [
                (model, by.get(split, {}).get(metric)) for model, by in baselines["models"].items()
            ]
            shown = [f"{model} {v * factor:.{d}f}" for model, v in found if v is not None]
            if shown:
                lines.append(f"lines to beat ({split} {label} of trivial models): "
                             + ", ".join(shown))  # fmt: skip
    lines += [verdict_line(row, metric, split, label) for row in primary["rows"]]
    # first: a verdict withheld below says why before any score
    return learning_warnings(report.get("learning", []), metric, label) + lines


def learning_warnings(
    rows: list[dict[str, Any]], metric: str = "loss", label: str | None = None
) -> list[str]:
    """A warning line per run that did not learn beyond the trivial baselines, its losses in
    the summary's ``metric`` (``label``: its name) and what to try from the run's settings."""
    scale, unit = metric_unit(metric, label)
    return [
        warning
        for r in rows
        if (
            warning := plateau_warning(
                r["check"], f"{_row(r['name'])} seed {r['seed']}", scale, unit, r.get("hint")
            )
        )
    ]
