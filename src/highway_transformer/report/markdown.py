"""The report's ``index.md``: every table and note as Markdown, from ``report.json``'s values."""

from __future__ import annotations

from typing import Any

from ..tasks.floor import metric_unit, plateau_warning
from .analysis import analysis_markdown
from .code import code_markdown
from .figures import HEATMAP_NOTE
from .machines import machines_markdown
from .runs import METADATA_KEYS, number
from .stats import PERCENT_METRICS, better_word, higher_is_better

DOWN = "⇓"


def uneven_seeds_note(rows: list[dict[str, Any]]) -> list[str]:
    """Says so when rows ran different seeds (which changes what Δ compares)."""
    seeds = {r["name"]: sorted(r["seeds"]) for r in rows}
    if len({tuple(s) for s in seeds.values()}) <= 1:
        return []
    listed = "; ".join(f"{name} {', '.join(map(str, s))}" for name, s in seeds.items())
    return [
        f"**The rows ran different seeds** ({listed}): Δ in the results table compares each "
        "row with its baseline on the seeds both ran; every other figure (means, curves, "
        "times, steps) is over each row's own seeds.",
        "",
    ]


def direction_summary(rows: list[dict[str, Any]], metric: str, paper: bool = True) -> str:
    """One sentence counting the rows that follow the paper's claim (the
    parameter-matched plain row is in the table but not counted); ``paper``: whether the
    rows have published figures to check the direction against."""
    rows = [r for r in rows if not r.get("param_matched")]
    if not rows:
        return "No row ran beside its baseline, so the paper's direction cannot be checked."
    n = len(rows)
    faster = sum(bool(r["converges_faster"]) for r in rows)
    timed = [r for r in rows if r["converges_sooner_in_time"] is not None]
    sooner = sum(bool(r["converges_sooner_in_time"]) for r in timed)
    in_time = (
        f"{sooner} of {len(timed)} also in less training time"
        if timed
        else "training time not compared"
    )
    better = sum(bool(r["better_at_equal_steps"]) for r in rows)
    signed = [r for r in rows if r["same_sign_as_paper"] is not None]
    same = sum(bool(r["same_sign_as_paper"]) for r in signed)
    sentence = (
        f"{faster} of {n} rows reached the baseline's best validation loss in fewer steps "
        f"than the baseline ({in_time}); {better} of {n} "
        f"ended with a {better_word(metric)} validation {metric} at equal steps"
    )
    if not paper:
        return sentence + "."
    return f"{sentence}; {same} of {len(signed)} changed in the direction the paper published."


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _yes_no_seeds(value: bool | None, seeds_paired: int) -> str:
    """``_yes_no``, saying so when one seed decided it: a tie within seed noise reads "yes"
    as readily as a real difference, and one seed has no interval to tell them apart."""
    answer = _yes_no(value)
    return f"{answer} (one seed)" if value is not None and seeds_paired == 1 else answer


def direction_markdown(rows: list[dict[str, Any]], metric: str, paper: bool = True) -> list[str]:
    word = better_word(metric)
    lines = [
        direction_summary(rows, metric, paper),
        "",
        f"| model | steps to baseline's best (baseline) | fewer steps | seconds (baseline) "
        f"| less time | Δ eval {metric} | {word} at equal steps | seeds {word} (paired) "
        + ("| paper Δ eval | same direction as paper |" if paper else "|"),
        "| --- | ---: | :---: | ---: | :---: | ---: | :---: | ---: "
        + ("| ---: | :---: |" if paper else "|"),
    ]
    for r in rows:
        reached = r["steps_to_baseline_best"]
        steps = f"{'not reached' if reached is None else reached} ({r['baseline_steps']})"
        seconds = format_value(r["seconds_to_baseline_best"], 1)
        seconds += f" ({format_value(r['baseline_seconds'], 1)})"
        cells = [
            r["name"],
            steps,
            _yes_no(r["converges_faster"]),
            seconds,
            _yes_no(r["converges_sooner_in_time"]),
            _fmt_change(r["eval_change_pct"], higher_is_better(metric)),
            _yes_no_seeds(r["better_at_equal_steps"], r["seeds_paired"]),
            f"{r['seeds_better']}/{r['seeds_paired']}",
        ]
        if paper:
            cells += [
                _fmt_change(r["paper_eval_change_pct"], higher_is_better(metric)),
                _yes_no_seeds(r["same_sign_as_paper"], r["seeds_paired"]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def primary_markdown(primary: dict[str, Any] | None, metric: str, paper: bool = True) -> list[str]:
    """The registered comparison and its verdicts: the report's only verdicts (``paper``:
    with the published change beside each)."""
    if primary is None:
        return []
    lines = ["## Verdicts: the registered comparison", ""]
    if primary["comparison"] is None:
        return [*lines, f"**No verdict**: {primary['note']}.", ""]
    fingerprint = primary["comparison"]["fingerprint"]
    lines += [
        f"Rule ({primary['status']}, fingerprint `{fingerprint}`): {primary['rule']}. "
        f"{primary['note'][0].upper()}{primary['note'][1:]}.",
        "",
        "Only this section decides a verdict. Everything after it (the best checkpoint, "
        "curves, steps to targets, values before annealing) is **exploratory**: it "
        "describes the runs but was not fixed before them.",
        "",
    ]
    if not primary["rows"]:
        return [*lines, "No registered pair has both of its rows among these runs.", ""]
    d = 4 if metric == "bpc" else 2
    lines += [
        f"| claim | row − against, {metric} per seed | mean [95% t-interval] | Δ "
        + ("| paper Δ | scored | verdict |" if paper else "| scored | verdict |"),
        "| --- | --- | --- | ---: " + ("| ---: | --- | --- |" if paper else "| --- | --- |"),
    ]
    better_higher = higher_is_better(metric)
    for row in primary["rows"]:
        paired = row["paired"]
        per_seed = "—" if paired is None else _seed_values(paired["per_seed"], d, sign=True)
        published = (
            _fmt_change(row["published_change_pct"], better_higher)
            + (f" ({row['published_split']})" if row.get("published_split") not in
               (None, primary["comparison"]["split"]) else "")
        )  # fmt: skip
        lines.append(
            "| " + " | ".join([
                row["claim"], per_seed, format_difference(paired, d),
                _fmt_change(row["change_pct"], better_higher), *([published] if paper else []),
                "; ".join(row["sources"]), f"**{row['verdict']}**",
            ]) + " |"
        )  # fmt: skip
    return [*lines, ""]


def format_value(value: float | None, digits: int = 4) -> str:
    """``1.2345``; ``—`` where there is none."""
    return "—" if value is None else f"{value:.{digits}f}"


def _seed_values(values: dict[str, float | None], digits: int, sign: bool = False) -> str:
    """``s1 1.2345, s2 1.2400``: one value a seed, in seed order (``sign``: ``+0.0100``)."""
    return ", ".join(
        f"s{seed} " + ("—" if v is None else f"{v:{'+' if sign else ''}.{digits}f}")
        for seed, v in sorted(values.items())
    )


def format_stats(s: dict[str, float] | None, digits: int) -> str:
    """A :func:`~.stats.summary` as ``mean ± sd`` (the mean alone for one value)."""
    if s is None:
        return "—"
    if s["n"] > 1:
        return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
    return f"{s['mean']:.{digits}f}"


def _fmt_change(change: float | None, higher_better: bool = False) -> str:
    """``+1.23%``, marked when it is an improvement (a fall, or a rise where higher is
    better, as for accuracy)."""
    if change is None:
        return "—"
    improved = change > 0 if higher_better else change < 0
    return f"{change:+.2f}%" + (f" {DOWN}" if improved else "")


def _mark(cell: str, improved: bool | None) -> str:
    return f"{cell} {DOWN}" if improved else cell


def paper_markdown(rows: list[dict[str, Any]], metric: str, paper: bool = True) -> list[str]:
    """The results table; ``paper``: with the published figures' columns."""
    d = 4 if metric == "bpc" else 2
    m, up = metric, higher_is_better(metric)
    published = f" paper eval {m} | paper test {m} | paper Δ eval | paper Δ test |"
    lines = [
        f"| model | seeds | params | eval loss | eval {m} | Δ eval | test loss | test {m} "
        f"| Δ test |" + (published if paper else ""),
        "| --- " + "| ---: " * (12 if paper else 8) + "|",
    ]
    for r in rows:
        pub = r["published"]
        base = "baseline" if r["is_baseline"] else None
        cells = [
            r["name"],
            str(len(r["seeds"])),
            "—" if r["parameters"] is None else f"{r['parameters']:,.0f}",
            format_stats(r["eval_loss"], 4),
            _mark(format_stats(r[f"eval_{m}"], d), r[f"eval_{m}_improved"]),
            base or _fmt_change(r[f"eval_{m}_change_pct"], up),
            format_stats(r["test_loss"], 4),
            _mark(format_stats(r[f"test_{m}"], d), r[f"test_{m}_improved"]),
            base or _fmt_change(r[f"test_{m}_change_pct"], up),
        ]
        if paper:
            cells += [
                format_value(pub.get(f"eval_{m}"), d),
                format_value(pub.get(f"test_{m}"), d),
                base or _fmt_change(r[f"published_eval_{m}_change_pct"], up),
                base or _fmt_change(r[f"published_test_{m}_change_pct"], up),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def format_difference(paired: dict[str, Any] | None, digits: int, verdict: bool = True) -> str:
    """``-0.0210 [-0.0450, +0.0030] unresolved`` (the verdict word only with ``verdict``);
    ``—`` for no pair."""
    if paired is None:
        return "—"
    text = f"{paired['mean']:+.{digits}f}"
    if paired["interval"] is not None:
        lo, hi = paired["interval"]
        text += f" [{lo:+.{digits}f}, {hi:+.{digits}f}]"
        text += f" {paired['verdict']}" if verdict else ""
    return text


def statistics_markdown(rows: list[dict[str, Any]], metric: str) -> list[str]:
    """Per-seed values, mean ± std and the paired difference to the baseline per row."""
    d = 4 if metric == "bpc" else 2
    lines = [
        f"| model | seeds | eval {metric} per seed | eval {metric} mean ± std "
        f"| Δ eval vs baseline, paired [95% t-interval] | test {metric} per seed "
        f"| Δ test vs baseline, paired [95% t-interval] |",
        "| --- | ---: | --- | ---: | --- | --- | --- |",
    ]

    def values(r: dict[str, Any], key: str) -> str:
        return _seed_values({s: v.get(key) for s, v in r["per_seed"].items()}, d)

    for r in rows:
        base = "baseline" if r["is_baseline"] else None
        lines.append(
            "| " + " | ".join([
                r["name"], str(len(r["seeds"])), values(r, f"eval_{metric}"),
                format_stats(r[f"eval_{metric}"], d),
                base or format_difference(r[f"eval_{metric}_paired"], d),
                values(r, f"test_{metric}"),
                base or format_difference(r[f"test_{metric}_paired"], d),
            ]) + " |"
        )  # fmt: skip
    return lines


def contrasts_markdown(contrasts: list[dict[str, Any]], metric: str) -> list[str]:
    """The claims that set one row against another, paired by seed (empty: no section)."""
    if not contrasts:
        return []
    d = 4 if metric == "bpc" else 2
    lines = [
        "## Row against row (exploratory)",
        "",
        "Claims that compare two rows other than the baseline: Δ is *row − other*, seed by "
        "seed, then averaged, with its 95% Student-t interval (*lower*: the row is below the "
        "other on that interval); *paper Δ* is the same difference of the published figures.",
        "",
        f"| claim | row | other | Δ eval {metric} per seed | Δ eval, paired [95% t-interval] "
        f"| Δ test, paired [95% t-interval] | paper Δ eval | paper Δ test |",
        "| --- | --- | --- | --- | --- | --- | ---: | ---: |",
    ]
    for c in contrasts:
        paired = c[f"eval_{metric}_paired"]
        per_seed = "—" if paired is None else _seed_values(paired["per_seed"], d, sign=True)
        published = [c[f"published_{s}_{metric}_difference"] for s in ("eval", "test")]
        lines.append(
            "| " + " | ".join([
                c["claim"], c["row"], c["other"], per_seed,
                format_difference(paired, d), format_difference(c[f"test_{metric}_paired"], d),
                *("—" if v is None else f"{v:+.{d}f}" for v in published),
            ]) + " |"
        )  # fmt: skip
    return [*lines, ""]


def fractions_markdown(table: dict[str, Any]) -> list[str]:
    if "skipped" in table:
        return [f"*skipped — {table['skipped']}.*"]
    fractions = table["fractions"]
    targets = ", ".join(f"{f:.0%}: {table['targets'][str(f)]:.4f}" for f in fractions)
    plateau = (
        "has plateaued (under 2% of its improvement came in its last 20% of steps)"
        if table["baseline_plateaued"]
        else "has **not** plateaued (2% or more of its improvement came in its last 20% of "
        "steps): steps to fractions near 100% restate its last steps"
    )
    lines = [
        f"Targets (validation loss covering that fraction of the baseline's improvement from "
        f"its first to its best logged value): {targets}. The baseline {plateau}.",
        "",
        "| model | " + " | ".join(f"steps to {f:.0%} (ratio)" for f in fractions) + " |",
        "| --- " + "| ---: " * len(fractions) + "|",
    ]
    for r in table["rows"]:
        cells = [
            "not reached" if r["steps"][str(f)] is None
            else f"{r['steps'][str(f)]} ({format_value(r['ratio'][str(f)], 3)})"
            for f in fractions
        ]  # fmt: skip
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return lines


def runs_markdown(runs: list[dict[str, Any]]) -> list[str]:
    annealed = any(run["metadata"].get("rate_changes") is not None for run in runs)
    header = "| run | seed | threads | device | precision | torch | wall seconds | stretches |"
    rule = "| --- | ---: | ---: | --- | --- | --- | ---: | --- |"
    if annealed:  # validation-driven rates: where each run's rate changed
        header, rule = header + " learning rate annealed |", rule + " --- |"
    lines = [header, rule]
    for run in runs:
        m = run["metadata"]
        cells = [run["name"], str(run["seed"])]
        cells += ["—" if m.get(k) is None else str(m[k]) for k in METADATA_KEYS]
        cells.append(format_value(m.get("train_seconds"), 1))
        cells.append(stretch_summary(m.get("stretches")))
        if annealed:
            cells.append(rate_change_summary(m.get("rate_changes")))
        lines.append("| " + " | ".join(cells) + " |")
    if annealed:
        lines += [
            "",
            "The rate is annealed on validation, so runs compared at equal steps "
            "after annealing at different steps differ in their rate as well as their model.",
        ]
    return lines


def rate_change_summary(changes: list[dict[str, float]] | None) -> str:
    """``never``, or each change as ``step N: from → to``; ``—`` for a fixed schedule."""
    if changes is None:
        return "—"
    if not changes:
        return "never"
    return "; ".join(f"step {c['step']:,}: {c['from']:g} → {c['to']:g}" for c in changes)


def before_annealing_markdown(table: dict[str, Any] | None) -> list[str]:
    """The report section for :func:`.annealing.before_annealing`; none for fixed schedules."""
    if table is None:
        return []
    metric = table["metric"]
    digits = 4 if metric == "bpc" else 2
    lines = [
        "## Before either run annealed (exploratory)",
        "",
        "The rate is annealed on validation: once either run's rate has changed, a row and "
        "its baseline differ in their rate as well as their model. Here each row is set "
        "against its baseline, seed by seed, at the last periodic validation before the "
        "first rate change of either run (the *end*, where neither annealed). Periodic "
        "validations may read part of the split (*tokens*), so these values are not the "
        "final ones above.",
        "",
        f"| model | per seed: step (tokens): row − baseline {metric} | Δ mean | paired "
        "[95% t-interval] |",
        "| --- | --- | ---: | --- |",
    ]
    for row in table["rows"]:
        seeds = "; ".join(_seed_cell(seed, p, digits) for seed, p in row["per_seed"].items())
        change = "—" if row["change_pct"] is None else f"{row['change_pct']:+.2f}%"
        paired = format_difference(row["paired"], digits)
        lines.append(f"| {row['name']} | {seeds or '—'} | {change} | {paired} |")
    return [*lines, ""]


def _seed_cell(seed: str, point: dict[str, Any], digits: int) -> str:
    """``s1 23,240 (50,000 tokens): 142.95 − 150.40``; ``end`` where neither run annealed."""
    notes = [] if point["annealed"] else ["end"]
    if point["tokens"] is not None:
        notes.append(f"{point['tokens']:,.0f} tokens")
    where = f"{point['step']:,}" + (f" ({'; '.join(notes)})" if notes else "")
    return f"s{seed} {where}: {point['row']:.{digits}f} − {point['baseline']:.{digits}f}"


def _machine(stretch: dict[str, Any]) -> str:
    if stretch.get("recorded") is False:
        return "not recorded"
    threads = stretch.get("threads")
    return (
        f"{stretch.get('device')} {stretch.get('cpu_capability')}, "
        f"{threads} thread{'' if threads == 1 else 's'}, torch {stretch.get('torch')}"
    )


def stretch_summary(stretches: list[dict[str, Any]] | None) -> str:
    """How many uninterrupted stretches a run trained in and, when it was resumed, where
    each ran (steps and machine): a run resumed elsewhere is not bit-exact."""
    if not stretches:
        return "—"
    if len(stretches) == 1:
        return "1"
    parts = [f"{x['from_step']}–{x['to_step']}: {_machine(x)}" for x in stretches]
    return f"{len(stretches)} ({'; '.join(parts)})"


def protocols_markdown(rows: list[dict[str, Any]], metric: str = "bpc") -> list[str]:
    """How the published columns were measured, where the table says (HT Table 5), and our
    validation measured the same way where the runs hold it."""
    labels = {k: v for r in rows for k, v in r["protocols"].items()}
    if not labels:
        return []
    lines = ["Published columns and how they were measured:", ""]
    lines += [f"- *paper {key.replace('_', ' ')}*: {label}" for key, label in labels.items()]
    key = f"eval_{metric}_paper_protocol"
    measured = [r for r in rows if r.get(key)]
    if measured:
        lines += ["", f"Our validation measured the paper's eval way (scaled; best checkpoint, "
                  f"whole split) beside the published eval column; the *eval {metric}* of the "
                  "table below uses the test protocol's settings.", "",
                  f"| model | eval {metric}, paper's protocol | paper eval {metric} |",
                  "| --- | ---: | ---: |"]  # fmt: skip
        for r in measured:
            paper = format_value(r["published"].get(f"eval_{metric}"))
            lines.append(f"| {r['name']} | {format_stats(r[key], 4)} | {paper} |")
    return [*lines, ""]


def acceleration_markdown(table: dict[str, Any], split: str) -> list[str]:
    what = "validation" if split == "valid" else "training"
    if "skipped" in table:
        return [f"*{what} loss: skipped — {table['skipped']}.*"]
    lines = [
        f"Target: the baseline ({table['baseline']}) best {what} loss "
        f"{table['target_loss']:.4f}, first reached at step {table['baseline_steps']}.",
        "",
        f"| model | best {what} loss | steps to target | seconds to target | ratio to baseline |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in table["rows"]:
        steps = "not reached" if r["steps_to_target"] is None else str(r["steps_to_target"])
        ratio = format_value(r["ratio_to_baseline_steps"], 3)
        lines.append(
            f"| {r['name']} | {format_value(r['best_loss'])} | {steps} | "
            f"{format_value(r['seconds_to_target'], 1)} | {ratio} |"
        )
    return lines


def time_markdown(rows: list[dict[str, Any]], paper: bool = True) -> list[str]:
    lines = [
        "| model | params | steps | train seconds | hours | s/step | Δ time "
        + ("| paper hours | paper Δ time |" if paper else "|"),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: " + ("| ---: | ---: |" if paper else "|"),
    ]
    for r in rows:
        own = r["baseline"] == r["name"]
        cells = [
            r["name"],
            "—" if r["parameters"] is None else f"{r['parameters']:,.0f}",
            "—" if r["steps"] is None else f"{r['steps']:.0f}",
            format_stats(r["train_seconds"], 1),
            format_value(r["train_hours"], 3),
            format_stats(r["seconds_per_step"], 4),
            "baseline" if own else _fmt_change(r["time_change_pct"]),
        ]
        if paper:
            cells += [
                format_value(r["published_train_hours"], 2),
                "baseline" if own else _fmt_change(r["published_time_change_pct"]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _image_lines(names: list[str], alt: str) -> list[str]:
    """Each figure shown; a report written before figures were SVG only names its PNG."""
    shown = [n for n in names if n.endswith(".svg")] or [n for n in names if n.endswith(".png")]
    return [f"![{alt}]({n})" for n in shown]


def _steps_cell(scores: dict[str, Any]) -> str:
    """``12,288`` env steps to the target; ``>15,360`` where censored at the budget."""
    steps = scores["steps_to_target"]
    return "—" if steps is None else f"{'>' if scores['censored'] else ''}{steps:,.0f}"


def _paired_cell(row: dict[str, Any], key: str, digits: int) -> str:
    return "baseline" if row["is_baseline"] else format_difference(row["paired"].get(key), digits)


def success_markdown(section: dict[str, Any] | None) -> list[str]:
    """The rl task's training scores (:mod:`.success`); nothing for other tables."""
    if not section:
        return []
    target, episodes = section["target"], ", ".join(map(str, section["stats_episodes"]))
    lines = [
        "## Training success and steps to success (exploratory)",
        "",
        f"From each run's training log at its last step: success rate and episodic return "
        f"over the last {episodes} training episodes (sampled actions, not greedy); and the "
        f"environment steps until that success rate first reached {target:.0%} with its "
        "window full. A run that never reached it is censored at its budget: `>N` is its "
        "last logged environment steps, and the paired Δ reads N (a lower bound on its "
        "cost). Δ is row − baseline, paired by seed, with its 95% Student-t interval.",
        "",
        "| model | training success per seed | Δ success [95% t-interval] | training return "
        "per seed | Δ return [95% t-interval] | env steps to "
        f"{target:.0%} per seed | censored | Δ env steps [95% t-interval] |",
        "| --- | --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for r in section["rows"]:
        seeds = r["per_seed"]
        lines.append(
            "| " + " | ".join([
                r["name"],
                _seed_values({s: v["last_success"] for s, v in seeds.items()}, 2),
                _paired_cell(r, "last_success", 2),
                _seed_values({s: v["last_return"] for s, v in seeds.items()}, 2),
                _paired_cell(r, "last_return", 2),
                ", ".join(f"s{s} {_steps_cell(v)}" for s, v in sorted(seeds.items())),
                f"{r['censored']} of {len(seeds)}",
                _paired_cell(r, "steps_to_target", 0),
            ]) + " |"
        )  # fmt: skip
    return [*lines, ""]


def index_markdown(report: dict[str, Any]) -> str:
    m = report["metric"]
    paper = report.get("paper", True)  # False: rows of no paper (``highway ab``)
    published = "; *paper* columns are the published figures" if paper else ""
    lines = [
        f"# {report['table_description']} — scale `{report['scale']}`",
        "",
        f"Scale: {report['scale_description']}.",
        "",
        *(
            [f"Overrides on top of the scale: `{' '.join(report['overrides'])}`.", ""]
            if report["overrides"]
            else []
        ),
        *(other_data_note(report["overrides"]) if paper else []),
        f"{len(report['runs'])} run(s) of {len(report['paper_table'])} row(s). *eval* is the "
        "validation split; Δ is the relative change to the row's baseline "
        f"({'positive' if higher_is_better(m) else 'negative'} is better for {m}; {DOWN} marks "
        f"an improvement{'; in percent' if m in PERCENT_METRICS else ''}); values are mean ± "
        f"sample standard deviation over seeds where there are several{published}.",
        "",
        *unusable_markdown(report.get("unusable", [])),
        # first: a verdict withheld below says why here, before any table
        *learning_markdown(report.get("learning", []), m, report.get("metric_label")),
        *in_progress_markdown(report.get("in_progress", [])),
        *code_markdown(report.get("code", {"one_code": True})),
        *machines_markdown(report["machines"]),
        *primary_markdown(report.get("primary"), m, paper),
        "## Results (paper format, exploratory)" if paper else "## Results (exploratory)",
        "",
        "Each run's scored weights as `results.json` records them: by default its best "
        "checkpoint by the periodic validation (which may read part of the split, at a step "
        "that differs from run to run), scored on the whole valid and test splits.",
        "",
        *protocols_markdown(report["paper_table"], m),
        *uneven_seeds_note(report["paper_table"]),
        *paper_markdown(report["paper_table"], m, paper),
        "",
        *baselines_markdown(report.get("baselines"), m),
        "## Seeds and paired differences (exploratory)",
        "",
        "Δ is row minus baseline, seed by seed (rows share their seeds), then averaged; the "
        "interval is the 95% Student-t interval of that mean (*lower* / *higher*: it excludes "
        "0; *unresolved*: it does not). One seed gives no interval.",
        "",
        *statistics_markdown(report["paper_table"], m),
        "",
        *contrasts_markdown(report["contrasts"], m),
        *success_markdown(report.get("success")),
        *before_annealing_markdown(report.get("before_annealing")),
        "## Convergence"
        + (f" ({report['paper_figures']} at this scale)" if report.get("paper_figures") else ""),
        "",
        "Mean over seeds at each logged step, the seeds' range shaded around it; grey lines on "
        "the validation panels: the trivial models (with `--baselines`). Training loss is the "
        "running mean over each log interval (a last, shorter interval is left out).",
        "",
        *_image_lines(report["figures"]["convergence_steps"], "convergence vs steps"),
        "",
        *_image_lines(report["figures"]["convergence_time"], "convergence vs time"),
        "",
        "## Does the paper's direction hold at this scale? (exploratory)"
        if paper
        else "## Faster or better than the baseline? (exploratory)",
        "",
        *direction_markdown(report["direction"], m, paper),
        "",
        "## Convergence acceleration (exploratory)",
        "",
        *acceleration_markdown(report["acceleration"]["valid"], "valid"),
        "",
        *acceleration_markdown(report["acceleration"]["train"], "train"),
        "",
        "### Steps to a fraction of the baseline's improvement (validation)",
        "",
        *fractions_markdown(report["fractions"]),
        "",
        "## Time cost and parameters" + (" (HT Table 7 style)" if paper else ""),
        "",
        *time_markdown(report["time"], paper),
        "",
        *_gates_markdown(report["gates"]),
        "",
        *(analysis_markdown(report["analyses"]) if report.get("analyses") else []),
        "## Runs",
        "",
        "Where each run trained (thread count decides bit-exactness: 1- and 2-thread runs "
        "differ from about the 8th digit).",
        "",
        *runs_markdown(report["runs"]),
        "",
        "## Missing or incomplete",
        "",
        *([f"- {item}" for item in report["missing"]] or ["Nothing is missing."]),
        "",
    ]
    return "\n".join(lines)


def other_data_note(overrides: list[str]) -> list[str]:
    """A warning when the runs read other data than the paper's (a ``data.corpus`` or
    ``task.dataset`` override): the published columns are then not comparable in value."""
    changed = [o for o in overrides if o.split("=", 1)[0] in ("data.corpus", "task.dataset")]
    if not changed:
        return []
    return [
        f"**These runs read other data than the paper's** (`{' '.join(changed)}`): the *paper* "
        "columns are the published figures on the paper's data, so compare directions and "
        "relative changes (Δ), not values.",
        "",
    ]


def unusable_markdown(unusable: list[dict[str, Any]]) -> list[str]:
    """The runs whose numbers cannot be used (NaN, a damaged file), which no number or
    figure of the report includes."""
    if not unusable:
        return []
    runs = "; ".join(f"{r['name']} seed {r['seed']} ({r['reason']})" for r in unusable)
    return [
        f"**Not usable, left out of every number and figure below:** {runs}. Train them "
        "again (or leave them out) and write the report again.",
        "",
    ]


def in_progress_markdown(in_progress: list[dict[str, Any]]) -> list[str]:
    """The runs still training, which no number or figure of the report includes."""
    if not in_progress:
        return []
    runs = "; ".join(
        f"{r['name']} seed {r['seed']} (step {r['step']:,} of {r['max_steps']:,})"
        for r in in_progress
    )
    return [
        f"**Still training, left out of every number and figure below:** {runs}. "
        "Resume them with `highway run` and write the report again.",
        "",
    ]


def _gates_markdown(gates: dict[str, Any]) -> list[str]:
    lines = ["## Gate biases b1 (HT Figures 13-14)", ""]
    if gates["heatmaps"]:
        lines += [f"How to read the heatmaps: {HEATMAP_NOTE}", ""]
    for name, files in gates["heatmaps"].items():
        lines += [f"### {name}", "", *_image_lines(files, f"{name} gate biases"), ""]
    pca = gates["pca"]
    if "skipped" in pca:
        lines.append(f"*PCA skipped: {pca['skipped']}.*")
    else:
        lines += ["### PCA of the per-layer, per-sublayer bias vectors", ""]
        lines += _image_lines(pca["figure"], "PCA of gate biases")
    return lines


def learning_markdown(
    rows: list[dict[str, Any]], metric: str = "loss", label: str | None = None
) -> list[str]:
    """ "Did every run learn?": each run's validation loss against its task's best trivial
    baseline (``tasks/floor.py``), shown in the report's ``metric`` (``label``: its name); a
    warning per run that did not, with what to try from its settings, and that the verdicts
    with it are withheld."""
    checked = [r for r in rows if r["check"] is not None]
    if not checked:
        return []
    scale, unit = metric_unit(metric, label)
    lines = ["## Did every run learn?", ""]
    stuck = [r for r in checked if not r["check"]["learned"]]
    first = checked[0]["check"]
    if not stuck:
        lines.append(
            f"Yes: every run's validation loss is more than {first['margin']:.0%} below "
            f"its task's best trivial baseline ({first['baseline']}, "
            f"{scale(first['baseline_loss']):.4f} {unit})."
        )
    else:
        lines += [
            "**No**: the verdicts of the comparisons with these runs are withheld (a "
            "difference between runs that learned nothing a trivial model does not hold is "
            "noise).",
            "",
        ]
    for r in stuck:
        name = f"{r['name']} seed {r['seed']}"
        warning = plateau_warning(r["check"], name, scale, unit, r.get("hint"))
        lines.append(f"- **{warning}**")
    unchecked = len(rows) - len(checked)
    if unchecked:
        lines += ["", f"{unchecked} run(s) recorded no check (run `highway report --baselines`)."]
    sources = {r["source"] for r in checked}
    lines += ["", f"Checks: {', '.join(sorted(sources))}.", ""]
    return lines


def baselines_markdown(baselines: dict[str, Any] | None, metric: str) -> list[str]:
    """The "Lines to beat" section: every trivial model's valid and test figure, and its NLL
    beside an accuracy (a model without a figure, as 1-NN without an NLL, shows —)."""
    if baselines is None:
        return []
    lines = ["## Lines to beat", ""]
    if "not_computed" in baselines:
        return [*lines, f"Trivial baselines not computed: {baselines['not_computed']}", ""]
    models = baselines["models"]
    # An accuracy says nothing of the loss, so the loss goes beside it where models have one.
    has_loss = any("loss" in s for by in models.values() for s in by.values())
    columns = [metric] + (["loss"] if metric in PERCENT_METRICS and has_loss else [])
    heads = " | ".join(f"eval {c} | test {c}" for c in columns)
    where = f"{'above' if higher_is_better(metric) else 'below'} them"
    if len(columns) > 1:
        where += f" in {metric} and below them in loss (nats; — where a model has no loss: 1-NN"
        where += " gives no probabilities)"
    lines += [
        "Trivial models estimated on the training split of the runs' data (`highway "
        f"baselines`): a model that has learned more than they hold is {where}.",
        "",
        f"| trivial model | {heads} |",
        "| --- |" + " ---: |" * (2 * len(columns)),
    ]
    for model, by_split in models.items():
        cells = [
            _baseline_cell(by_split.get(split, {}).get(column), column)
            for column in columns
            for split in ("valid", "test")
        ]
        lines.append(f"| {model} | {' | '.join(cells)} |")
    return [*lines, ""]


def _baseline_cell(value: Any, metric: str) -> str:
    """As the results table prints the metric: percent for accuracies, bpc to 4 digits."""
    value = number(value)
    factor = 100 if metric in PERCENT_METRICS else 1
    digits = 4 if metric in ("bpc", "loss") else 2
    return format_value(None if value is None else value * factor, digits)


def sample_lines(samples: dict[str, str] | None, how: str) -> list[str]:
    """A ``## Samples`` section: ``how`` they were drawn, then each model's text; [] without."""
    if not samples:
        return []
    lines = ["## Samples", "", how, ""]
    for name, text in samples.items():
        lines += [f"**{name}**", "", "```text", text.strip("\n"), "```", ""]
    return lines
