"""The A/B views of a report (``report.json``'s values): what ``highway ab`` prints when its
report is written (each row's score, the lines to beat, one verdict line a variant) and the
front page of a named A/B (``highway demo``'s ``report.md``: those lines, every seed's value
and each model's sample)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..experiments.named import NamedAB
from ..tasks.floor import metric_unit, plateau_warning
from .markdown import format_difference, format_stats, format_value, sample_lines
from .stats import PERCENT_METRICS, higher_is_better, mean, summary

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
    values = model_values(primary)
    scores = []
    for name, per_seed in values.items():
        scores.append(f"{name} {format_stats(summary(per_seed.values()), d)}")
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


def model_values(primary: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Each model's value a seed (``{"plain": {"1": 2.81, ...}, ...}``), the baseline first,
    from the registered comparison's rows."""
    values: dict[str, dict[str, float | None]] = {}
    for row in primary["rows"]:
        values.setdefault(_row(row["against"]), row["against_per_seed"])
        values.setdefault(_row(row["row"]), row["row_per_seed"])
    return values


def seed_table(primary: dict[str, Any], digits: int = 4) -> list[str]:
    """Every model's value a seed and each variant minus the baseline (per seed, then its
    mean and 95% t-interval): a markdown table of the registered comparison's rows."""
    rows = primary["rows"]
    values = model_values(primary)
    if not rows:
        return []
    seeds = sorted({int(s) for per_seed in values.values() for s in per_seed})
    diffs = [f"{_row(r['row'])} {MINUS} {_row(r['against'])}" for r in rows]
    lines = [
        "| seed | " + " | ".join([*values, *diffs]) + " |",
        "| ---: " + "| ---: " * (len(values) + len(diffs)) + "|",
    ]
    for seed in seeds:
        cells = [format_value(per_seed.get(str(seed)), digits) for per_seed in values.values()]
        for row in rows:
            d = (row["paired"] or {"per_seed": {}})["per_seed"].get(str(seed))
            cells.append("—" if d is None else _signed(f"{d:+.{digits}f}"))
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    means = [format_value(mean(per_seed.values()), digits) for per_seed in values.values()]
    means += [_signed(format_difference(r["paired"], digits, verdict=False)) for r in rows]
    lines.append("| mean [95% t-interval] | " + " | ".join(means) + " |")
    return lines


def trivial_line(report: dict[str, Any], digits: int = 4) -> str | None:
    """Which models' means beat the best trivial model of the registered split (the lines to
    beat: has a model learned more than a trigram holds?); None where none was computed."""
    primary, metric = report["primary"], report["metric"]
    models = (report.get("baselines") or {}).get("models")
    if not models or primary["comparison"] is None:
        return None
    split = primary["comparison"]["split"]
    found = {m: by.get(split, {}).get(metric) for m, by in models.items()}
    found = {m: float(v) for m, v in found.items() if v is not None}
    means = {name: mean(per_seed.values()) for name, per_seed in model_values(primary).items()}
    means = {name: m for name, m in means.items() if m is not None}
    if not found or not means:
        return None
    up = higher_is_better(metric)
    best = (max if up else min)(found, key=lambda m: found[m])
    line = f"{best} {found[best]:.{digits}f}"
    beat = [name for name, m in means.items() if (m > found[best] if up else m < found[best])]
    if not beat:
        return (
            f"no model's mean beats the best trivial model ({line}): at this budget none has "
            f"learned more than a {best} model holds"
        )
    rest = [name for name in means if name not in beat]
    return f"mean over seeds beating the best trivial model ({line}): {', '.join(beat)}" + (
        f"; not beating it: {', '.join(rest)}" if rest else ""
    )


def _signed(text: str) -> str:
    return text.replace("-", MINUS)


def write_ab_page(
    out: Path,
    report: dict[str, Any],
    named: NamedAB,
    steps: int,
    samples: dict[str, str] | None = None,
    tiny: bool = False,
) -> dict[str, Any]:
    """``out/report.md`` and ``out/NAME.json`` of a named A/B from its ``report`` (``report.json``
    of ``out/report``): the verdicts and their intervals, each seed's values, the lines to
    beat, the figure and the samples (``tiny``: says first that the rows were shrunk)."""
    primary, metric = report["primary"], report["metric"]
    verdicts = summary_lines(report)
    digits = _digits(metric)
    trivial = trivial_line(report, digits)
    paired = max(((row["paired"] or {"n": 0})["n"] for row in primary["rows"]), default=0)
    figures = report["figures"]["convergence_steps"]
    figure = next((f"report/{f}" for f in figures if f.endswith(".svg")), None)
    base = next(iter(named.rows))
    lines = [
        f"# {named.title}",
        "",
        *([named.tiny_note, ""] if tiny else []),
        named.intro.format(steps=steps),
        "",
        "## Verdicts",
        "",
        *[f"- {line}" for line in verdicts],
        *([f"- {trivial}"] if trivial else []),
        "",
        *([ONE_SEED, ""] if paired < 2 else []),
    ]
    if primary["comparison"] is not None:
        lines += [
            f"Rule ({primary['status']}, fingerprint `{primary['comparison']['fingerprint']}`): "
            f"{primary['rule']}.",
            "",
            *seed_table(primary, digits),
            "",
        ]
    lines += [
        "## The rest of the report",
        "",
        "[report/index.md](report/index.md): test scores, the steps each model needed to reach "
        f"{base}'s best validation loss, the trivial models' scores, the gates' biases. The "
        "figure draws each model's mean over its seeds (the table above is their spread).",
        "",
        *([f"![convergence, mean over seeds]({figure})", ""] if figure else []),
        *sample_lines(samples, f"Seed {named.sample_seed}'s best weights, temperature 0.7, "
                      "top-k 20, sampling seed 1:"),
    ]  # fmt: skip
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    page = {
        "title": named.title,
        "steps": steps,
        "tiny": tiny,
        "metric": metric,
        "summary": verdicts + ([trivial] if trivial else []),
        "primary": primary,
        "baselines": report.get("baselines"),
        "samples": samples or {},
        "report": "report/index.md",
        "plot": None if figure is None else str(out / figure),
    }
    text = json.dumps(page, indent=2, ensure_ascii=False)
    (out / f"{named.name}.json").write_text(text, encoding="utf-8")
    return page
