"""``highway report``: one folder of figures and tables from experiment run folders.

Reads the run folders written by :func:`highway_transformer.experiments.run_experiments`
(``experiment.json``, ``config.yaml``, ``metrics.jsonl``, ``results.json``, ``best/``) of one
table at one scale and writes:

* ``convergence_steps.{png,svg}`` and ``convergence_time.{png,svg}``: training and
  validation loss and bpc/perplexity against steps and training seconds, one line per row
  (the mean over seeds at each logged step);
* the paper-format table (eval = validation split), improvements over the row's baseline
  marked ⇓ with the relative change, the published figures and their change side by side,
  mean ± sample standard deviation over seeds;
* the convergence-acceleration table: steps and seconds each row needs to reach the
  baseline's best (mean-curve) validation and training loss, and the ratio to the steps the
  baseline itself needed;
* time cost and parameters per row (HT Table 7 style);
* the paper's direction, checked row by row: did the gated row reach the baseline's best
  validation loss in fewer steps, did it end better at equal steps (lower loss, higher
  accuracy: the task registry's direction; also seed by seed, paired by seed), and is the
  sign of its change the sign the paper published;
* gate-bias analysis of the learned SDU biases ``b1`` from each run's ``best/`` weights:
  a layer × dimension heatmap per sublayer kind (HT Figure 13) and a PCA scatter of the
  per-layer, per-sublayer vectors (Figure 14);
* ``index.md`` tying it together and ``report.json`` with every number and figure.

Runs with missing or truncated files are reported with what they have; what is missing is
listed in ``index.md`` and ``report.json``. A run still training (no ``results.json``, metrics
short of ``max_steps``) is no result: it is listed as in progress and left out of every
number and figure, so a table reported part-way compares finished runs only.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..config import read_text
from ..errors import CheckpointError, ConfigError, HighwayError
from ..folders import make_folder
from ..train import runfolder
from .convergence import steps_to_reach
from .figures import plot_convergence, plot_gate_heatmaps, plot_pca
from .gates import bias_matrices, load_gate_biases, pca_embedding, split_name
from .machines import machines_markdown, runs_by_machine
from .stats import (
    FRACTIONS,
    fraction_target,
    paired_difference,
    plateaued,
    shared_seeds,
    steps_to_fraction,
    summary,
)

EXPERIMENT_FILE = "experiment.json"
PROTOCOL_FILE = "protocol_eval.json"
DOWN = "⇓"


# --------------------------------------------------------------------------- loading


@dataclass
class RunRecord:
    """What one run folder holds, and what it lacks (``problems``)."""

    run_dir: Path
    experiment: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    protocol: dict[str, Any] | None = None  # protocol_eval.json: valid measured the paper's way
    # Still training (no results.json, metrics short of max_steps): (last step, max_steps).
    progress: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return str(self.experiment["name"])

    @property
    def seed(self) -> int:
        return int(self.experiment.get("seed", 1))

    @property
    def gated(self) -> bool:
        gate = self.config.get("model", {}).get("gate", {})
        return isinstance(gate, dict) and gate.get("kind", "none") != "none"


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders among ``paths``: each one itself, or every run folder beneath it."""
    found: dict[Path, None] = {}
    for item in paths:
        path = Path(item)
        if not path.exists():
            raise ConfigError(f"{path} does not exist; give run folders made by `highway run`")
        if (path / EXPERIMENT_FILE).is_file():
            found[path.resolve()] = None
            continue
        below = sorted(p.parent.resolve() for p in path.rglob(EXPERIMENT_FILE))
        if not below:
            raise ConfigError(
                f"{path} holds no {EXPERIMENT_FILE}; give run folders made by `highway run`"
            )
        found.update(dict.fromkeys(below))
    if not found:
        raise ConfigError("give at least one run folder")
    return list(found)


def _read_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(read_text(path, ConfigError, path.name))
    except (ConfigError, json.JSONDecodeError, RecursionError):
        problems.append(f"{path.name} is unreadable (truncated, binary or not JSON)")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name} does not hold a JSON object; ignored")
        return None
    return data


def _number(value: Any) -> float | None:
    """A finite-or-infinite real from a JSON value; None for anything else (text, bools)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _clean_results(results: dict[str, Any] | None, problems: list[str]) -> dict | None:
    """``results.json`` with only numeric figures under ``valid``/``test``; other values go."""
    if results is None:
        return None
    clean: dict[str, Any] = {k: v for k, v in results.items() if k not in ("valid", "test")}
    for split in ("valid", "test"):
        figures = results.get(split)
        if not isinstance(figures, dict):
            problems.append(f"results.json has no {split} figures")
            continue
        kept = {k: _number(v) for k, v in figures.items() if _number(v) is not None}
        if len(kept) < len(figures):
            problems.append(f"results.json: non-numeric {split} figures ignored")
        clean[split] = kept
    return clean


def _clean_record(record: Any) -> dict[str, Any] | None:
    """A metrics record with an integer step, a split name and numeric values, or None."""
    if not isinstance(record, dict):
        return None
    step, split = record.get("step"), record.get("split")
    if isinstance(step, bool) or not isinstance(step, int) or not isinstance(split, str):
        return None
    numbers = {k: _number(v) for k, v in record.items() if k not in ("step", "split")}
    return {"step": step, "split": split, **{k: v for k, v in numbers.items() if v is not None}}


def _read_metrics(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    if not path.is_file():
        problems.append("metrics.jsonl missing: no curves")
        return []
    records, bad = [], 0
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = _clean_record(json.loads(line))
        except (json.JSONDecodeError, RecursionError):
            record = None
        if record is None:
            bad += 1
        else:
            records.append(record)
    if bad:
        problems.append(f"metrics.jsonl: {bad} unreadable line(s) skipped (truncated write?)")
    return records


def _read_config(path: Path, problems: list[str]) -> dict[str, Any]:
    """``config.yaml`` as nested mappings; an unreadable or malformed file is a problem."""
    if not path.is_file():
        problems.append("config.yaml missing")
        return {}
    try:
        loaded = yaml.safe_load(read_text(path, ConfigError, "config.yaml"))
    except (ConfigError, yaml.YAMLError, RecursionError):
        loaded = None
    sections = ("model", "data", "train", "task")
    if not isinstance(loaded, dict) or any(
        not isinstance(loaded.get(k, {}), dict) for k in sections
    ):
        problems.append("config.yaml is malformed; ignored")
        return {}
    return loaded


def _check_experiment(experiment: dict[str, Any] | None, path: Path) -> dict[str, Any]:
    if experiment is None or not isinstance(experiment.get("name"), str):
        raise ConfigError(
            f"{path} is missing, unreadable or has no name; rerun `highway run` for this folder"
        )
    for key, kind in (("seed", int), ("overrides", list), ("scale", str), ("table", str)):
        if key in experiment and not isinstance(experiment[key], kind):
            raise ConfigError(f"{path}: {key} must be a {kind.__name__}, got {experiment[key]!r}")
    return experiment


def _check_complete(run: RunRecord) -> None:
    max_steps = run.config.get("train", {}).get("max_steps")
    max_steps = max_steps if isinstance(max_steps, int) and not isinstance(max_steps, bool) else 0
    last = max((int(r["step"]) for r in run.records), default=0)
    if run.records and max_steps and last < max_steps:
        if run.results is None:  # training, or interrupted: not a result yet
            run.progress = (last, max_steps)
            return
        run.problems.append(f"metrics.jsonl stops at step {last} of {max_steps}")
    if run.records and not any(r.get("split") == "valid" for r in run.records):
        run.problems.append("metrics.jsonl has no validation records")
    if run.results is None and not any("results.json" in p for p in run.problems):
        run.problems.append("results.json missing: unfinished run (resume it with `highway run`)")


def _with_registry_defaults(experiment: dict[str, Any]) -> dict[str, Any]:
    """Fill what an older or hand-written experiment.json lacks from the registry."""
    from ..experiments.registry import EXPERIMENTS

    experiment = {"overrides": [], **experiment}  # none recorded: none were given
    known = EXPERIMENTS.get(str(experiment["name"]))
    if known is None:
        return experiment
    defaults = {"table": known.table, "row": known.row, "metric": known.metric,
                "baseline": known.baseline, "published": known.published,
                "protocols": known.protocols, "also_in": list(known.also_in),
                "match_params_of": known.match_params_of}  # fmt: skip
    return {**defaults, **experiment}


def load_run(run_dir: str | Path) -> RunRecord:
    """Read one run folder; anything missing or truncated is noted in ``problems``."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    path = run_dir / EXPERIMENT_FILE
    experiment = _with_registry_defaults(_check_experiment(_read_json(path, problems), path))
    config = _read_config(run_dir / runfolder.CONFIG_FILE, problems)
    results = _clean_results(_read_json(run_dir / runfolder.RESULTS_FILE, problems), problems)
    records = _read_metrics(run_dir / runfolder.METRICS_FILE, problems)
    run = RunRecord(run_dir, experiment, config, results, records, problems)
    run.protocol = _read_json(run_dir / PROTOCOL_FILE, problems)
    _check_complete(run)
    return run


def check_one_table(runs: list[RunRecord]) -> tuple[str, str]:
    """The (table, scale) all runs share; mixing tables or scales raises ConfigError."""
    for key, what in (("table", "tables"), ("scale", "scales"), ("overrides", "overrides")):
        counts = Counter(str(r.experiment.get(key, "?")) for r in runs)
        if len(counts) > 1:
            named = ", ".join(f"{k} ({n} run{'s' * (n > 1)})" for k, n in sorted(counts.items()))
            raise ConfigError(
                f"the runs mix {what}: {named}; write one report per table, scale and overrides"
            )
    return str(runs[0].experiment.get("table", "?")), str(runs[0].experiment.get("scale", "?"))


def group_runs(runs: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """Runs by experiment name, rows in registry order, seeds in order."""
    from ..experiments.registry import EXPERIMENTS

    order = {name: i for i, name in enumerate(EXPERIMENTS)}
    groups: dict[str, list[RunRecord]] = {}
    for run in sorted(runs, key=lambda r: (order.get(r.name, len(order)), r.name, r.seed)):
        groups.setdefault(run.name, []).append(run)
    return groups


# --------------------------------------------------------------------------- numbers


def relative_change(value: float | None, base: float | None) -> float | None:
    """``(value - base) / base`` in percent; None when either is unknown."""
    if value is None or base is None or base == 0:
        return None
    return (value - base) / base * 100.0


def _mean(s: dict[str, float] | None) -> float | None:
    return None if s is None else s["mean"]


#: Metrics the papers publish in percent (results.json holds fractions).
PERCENT_METRICS = ("accuracy", "token_accuracy", "exact_match")


def higher_is_better(metric: str) -> bool:
    """Whether a larger ``metric`` is better, as the task registry declares it."""
    from ..tasks import TASKS

    return any(task.metrics.get(metric) == "higher" for task in TASKS.values())


def better_word(metric: str) -> str:
    """ "higher" or "lower": the better direction of ``metric`` (the task registry's word)."""
    return "higher" if higher_is_better(metric) else "lower"


def _improved(change: float | None, metric: str) -> bool | None:
    if change is None:
        return None
    return change > 0 if higher_is_better(metric) else change < 0


def _result(run: RunRecord, split: str, key: str) -> float | None:
    value = (run.results or {}).get(split, {}).get(key)
    if value is None:
        return None
    return float(value) * (100 if key in PERCENT_METRICS else 1)


def mean_curve(runs: list[RunRecord], split: str, key: str) -> list[tuple[int, float, float]]:
    """``(step, mean seconds, mean value)`` over the seeds that logged each step."""
    by_step: dict[int, list[tuple[float, float]]] = {}
    for run in runs:
        per_run = {
            int(r["step"]): (float(r.get("time", math.nan)), float(r[key]))
            for r in run.records
            if r.get("split") == split and key in r and not _partial_interval(run, r)
        }
        for step, point in per_run.items():
            by_step.setdefault(step, []).append(point)
    return [
        (step, float(np.mean([p[0] for p in pts])), float(np.mean([p[1] for p in pts])))
        for step, pts in sorted(by_step.items())
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
            "parameters": _mean(summary((r.results or {}).get("parameters") for r in runs)),
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
    """Means of ``row`` and its baseline over the seeds both have a value for: a row with a
    seed its baseline lacks (a table stopped part-way) is compared like with like."""
    if base is None:
        return _mean(row[key]), None
    mine, theirs = _by_seed(row, key), _by_seed(base, key)
    shared = shared_seeds(mine, theirs)
    if not shared:
        return None, None
    return (
        float(np.mean([mine[s] for s in shared])),
        float(np.mean([theirs[s] for s in shared])),
    )


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
    """Training time, seconds per step and parameters per row (HT Table 7 style); each
    row's change to its baseline only when ``timed`` (the runs trained on one machine)."""
    rows = {}
    for name, runs in groups.items():
        done = [r.results for r in runs if r.results]
        seconds = summary(r.get("train_seconds") for r in done)
        exp = runs[0].experiment
        rows[name] = {
            "name": name,
            "baseline": exp.get("baseline", name),
            "parameters": _mean(summary(r.get("parameters") for r in done)),
            "steps": _mean(summary(r.get("steps") for r in done)),
            "train_seconds": seconds,
            "train_hours": None if seconds is None else seconds["mean"] / 3600,
            "seconds_per_step": summary(
                r["train_seconds"] / r["steps"] for r in done if r.get("steps")
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
    base_by_seed = {r.seed: _result(r, "valid", metric) for r in base}
    pairs = [
        (_result(r, "valid", metric), base_by_seed.get(r.seed))
        for r in runs
        if r.seed in base_by_seed
    ]
    pairs = [(mine, theirs) for mine, theirs in pairs if mine is not None and theirs is not None]
    higher = higher_is_better(metric)
    return sum(mine > theirs if higher else mine < theirs for mine, theirs in pairs), len(pairs)


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


def direction_summary(rows: list[dict[str, Any]], metric: str) -> str:
    """One sentence counting the rows that follow the paper's claim (the
    parameter-matched plain row is in the table but not counted)."""
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
    return (
        f"{faster} of {n} rows reached the baseline's best validation loss in fewer steps "
        f"than the baseline ({in_time}); {better} of {n} "
        f"ended with a {better_word(metric)} validation {metric} at equal steps; {same} of "
        f"{len(signed)} changed "
        "in the direction the paper published."
    )


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def direction_markdown(rows: list[dict[str, Any]], metric: str) -> list[str]:
    word = better_word(metric)
    lines = [
        direction_summary(rows, metric),
        "",
        f"| model | steps to baseline's best (baseline) | fewer steps | seconds (baseline) "
        f"| less time | Δ eval {metric} | {word} at equal steps | seeds {word} (paired) "
        "| paper Δ eval | same direction as paper |",
        "| --- | ---: | :---: | ---: | :---: | ---: | :---: | ---: | ---: | :---: |",
    ]
    for r in rows:
        reached = r["steps_to_baseline_best"]
        steps = f"{'not reached' if reached is None else reached} ({r['baseline_steps']})"
        seconds = f"{_fmt(r['seconds_to_baseline_best'], 1)} ({_fmt(r['baseline_seconds'], 1)})"
        cells = [
            r["name"],
            steps,
            _yes_no(r["converges_faster"]),
            seconds,
            _yes_no(r["converges_sooner_in_time"]),
            _fmt_change(r["eval_change_pct"], higher_is_better(metric)),
            _yes_no(r["better_at_equal_steps"]),
            f"{r['seeds_better']}/{r['seeds_paired']}",
            _fmt_change(r["paper_eval_change_pct"], higher_is_better(metric)),
            _yes_no(r["same_sign_as_paper"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# --------------------------------------------------------------------------- gates


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def gate_analysis(groups: dict[str, list[RunRecord]], out_dir: Path) -> dict[str, Any]:
    """Heatmaps per row (first seed with gates) and a PCA of every run's bias vectors."""
    heatmaps: dict[str, list[str]] = {}
    points: list[tuple[str, str, int, np.ndarray]] = []
    for name, runs in groups.items():
        for run in runs:
            biases = _run_biases(run)
            if not biases:
                continue
            label = runs[0].experiment.get("row", name)
            label = f"{label} s{run.seed}" if len(runs) > 1 else label
            points += [(label, split_name(k)[1], split_name(k)[0], v) for k, v in biases.items()]
            if name not in heatmaps:
                stem = out_dir / f"gates_{_slug(str(runs[0].experiment.get('row', name)))}"
                paths = plot_gate_heatmaps(bias_matrices(biases), stem, f"{name}: gate biases b1")
                heatmaps[name] = [p.name for p in paths]
    return {"heatmaps": heatmaps, "pca": _pca(points, out_dir)}


def _run_biases(run: RunRecord) -> dict[str, np.ndarray]:
    if not run.gated:
        return {}
    try:
        biases = load_gate_biases(run.run_dir)
    except CheckpointError:
        run.problems.append(
            "no gate biases: none recorded in results.json and no readable best/ checkpoint"
        )
        return {}
    if not biases:
        run.problems.append("the gates of this model have no learned bias b1")
    return biases


def _pca(points: list[tuple[str, str, int, np.ndarray]], out_dir: Path) -> dict[str, Any]:
    if not points:
        return {"skipped": "no run with learned gate biases"}
    size = Counter(len(p[3]) for p in points).most_common(1)[0][0]
    kept = [p for p in points if len(p[3]) == size]
    coords = pca_embedding(np.stack([p[3] for p in kept]))
    labels, kinds, layers = [p[0] for p in kept], [p[1] for p in kept], [p[2] for p in kept]
    paths = plot_pca(coords, labels, kinds, layers, out_dir / "gates_pca")
    return {
        "figure": [p.name for p in paths],
        "points": [
            {"run": lab, "sublayer": kind, "layer": layer, "x": float(x), "y": float(y)}
            for lab, kind, layer, (x, y) in zip(labels, kinds, layers, coords, strict=True)
        ],
        "left_out": len(points) - len(kept),
    }


# --------------------------------------------------------------------------- markdown


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _fmt_stats(s: dict[str, float] | None, digits: int) -> str:
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


def paper_markdown(rows: list[dict[str, Any]], metric: str) -> list[str]:
    d = 4 if metric == "bpc" else 2
    m, up = metric, higher_is_better(metric)
    lines = [
        f"| model | seeds | params | eval loss | eval {m} | Δ eval | test loss | test {m} "
        f"| Δ test | paper eval {m} | paper test {m} | paper Δ eval | paper Δ test |",
        "| --- " + "| ---: " * 12 + "|",
    ]
    for r in rows:
        pub = r["published"]
        base = "baseline" if r["is_baseline"] else None
        cells = [
            r["name"],
            str(len(r["seeds"])),
            "—" if r["parameters"] is None else f"{r['parameters']:,.0f}",
            _fmt_stats(r["eval_loss"], 4),
            _mark(_fmt_stats(r[f"eval_{m}"], d), r[f"eval_{m}_improved"]),
            base or _fmt_change(r[f"eval_{m}_change_pct"], up),
            _fmt_stats(r["test_loss"], 4),
            _mark(_fmt_stats(r[f"test_{m}"], d), r[f"test_{m}_improved"]),
            base or _fmt_change(r[f"test_{m}_change_pct"], up),
            _fmt(pub.get(f"eval_{m}"), d),
            _fmt(pub.get(f"test_{m}"), d),
            base or _fmt_change(r[f"published_eval_{m}_change_pct"], up),
            base or _fmt_change(r[f"published_test_{m}_change_pct"], up),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _fmt_interval(paired: dict[str, Any] | None, digits: int) -> str:
    if paired is None:
        return "—"
    text = f"{paired['mean']:+.{digits}f}"
    if paired["interval"] is not None:
        lo, hi = paired["interval"]
        text += f" [{lo:+.{digits}f}, {hi:+.{digits}f}] {paired['verdict']}"
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
    for r in rows:
        per_seed = r["per_seed"]

        def values(key: str, per_seed: dict[str, Any] = per_seed) -> str:
            return ", ".join(
                f"s{seed} {_fmt(v.get(key), d)}" for seed, v in sorted(per_seed.items())
            )

        base = "baseline" if r["is_baseline"] else None
        lines.append(
            "| " + " | ".join([
                r["name"], str(len(r["seeds"])), values(f"eval_{metric}"),
                _fmt_stats(r[f"eval_{metric}"], d),
                base or _fmt_interval(r[f"eval_{metric}_paired"], d),
                values(f"test_{metric}"),
                base or _fmt_interval(r[f"test_{metric}_paired"], d),
            ]) + " |"
        )  # fmt: skip
    return lines


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
            else f"{r['steps'][str(f)]} ({_fmt(r['ratio'][str(f)], 3)})"
            for f in fractions
        ]  # fmt: skip
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return lines


def runs_markdown(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| run | seed | threads | device | precision | torch | wall seconds | stretches |",
        "| --- | ---: | ---: | --- | --- | --- | ---: | --- |",
    ]
    for run in runs:
        m = run["metadata"]
        cells = [run["name"], str(run["seed"])]
        cells += ["—" if m.get(k) is None else str(m[k]) for k in METADATA_KEYS]
        cells.append(_fmt(m.get("train_seconds"), 1))
        cells.append(stretch_summary(m.get("stretches")))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _machine(stretch: dict[str, Any]) -> str:
    if stretch.get("recorded") is False:
        return "not recorded"
    return (
        f"{stretch.get('device')} {stretch.get('cpu_capability')}, "
        f"{stretch.get('threads')} threads, torch {stretch.get('torch')}"
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
            paper = _fmt(r["published"].get(f"eval_{metric}"))
            lines.append(f"| {r['name']} | {_fmt_stats(r[key], 4)} | {paper} |")
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
        ratio = _fmt(r["ratio_to_baseline_steps"], 3)
        lines.append(
            f"| {r['name']} | {_fmt(r['best_loss'])} | {steps} | "
            f"{_fmt(r['seconds_to_target'], 1)} | {ratio} |"
        )
    return lines


def time_markdown(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| model | params | steps | train seconds | hours | s/step | Δ time "
        "| paper hours | paper Δ time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        own = r["baseline"] == r["name"]
        cells = [
            r["name"],
            "—" if r["parameters"] is None else f"{r['parameters']:,.0f}",
            "—" if r["steps"] is None else f"{r['steps']:.0f}",
            _fmt_stats(r["train_seconds"], 1),
            _fmt(r["train_hours"], 3),
            _fmt_stats(r["seconds_per_step"], 4),
            "baseline" if own else _fmt_change(r["time_change_pct"]),
            _fmt(r["published_train_hours"], 2),
            "baseline" if own else _fmt_change(r["published_time_change_pct"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _image_lines(names: list[str], alt: str) -> list[str]:
    png = [n for n in names if n.endswith(".png")]
    svg = [n for n in names if n.endswith(".svg")]
    out = [f"![{alt}]({n})" for n in png]
    if svg:
        out.append("(" + ", ".join(f"[{n}]({n})" for n in svg) + ")")
    return out


def index_markdown(report: dict[str, Any]) -> str:
    m = report["metric"]
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
        *other_data_note(report["overrides"]),
        f"{len(report['runs'])} run(s) of {len(report['paper_table'])} row(s). *eval* is the "
        "validation split; Δ is the relative change to the row's baseline "
        f"({'positive' if higher_is_better(m) else 'negative'} is better for {m}; {DOWN} marks "
        f"an improvement{'; in percent' if m in PERCENT_METRICS else ''}); values are mean ± "
        "sample standard deviation over seeds where there are several; *paper* columns are the "
        "published figures.",
        "",
        *in_progress_markdown(report.get("in_progress", [])),
        *machines_markdown(report["machines"]),
        "## Results (paper format)",
        "",
        *protocols_markdown(report["paper_table"], m),
        *uneven_seeds_note(report["paper_table"]),
        *paper_markdown(report["paper_table"], m),
        "",
        *baselines_markdown(report.get("baselines"), m),
        "## Seeds and paired differences",
        "",
        "Δ is row minus baseline, seed by seed (rows share their seeds), then averaged; the "
        "interval is the 95% Student-t interval of that mean (*lower* / *higher*: it excludes "
        "0; *unresolved*: it does not). One seed gives no interval.",
        "",
        *statistics_markdown(report["paper_table"], m),
        "",
        "## Convergence"
        + (f" ({report['paper_figures']} at this scale)" if report.get("paper_figures") else ""),
        "",
        "Mean over seeds at each logged step; training loss is the running mean over each "
        "log interval (a last, shorter interval is left out).",
        "",
        *_image_lines(report["figures"]["convergence_steps"], "convergence vs steps"),
        "",
        *_image_lines(report["figures"]["convergence_time"], "convergence vs time"),
        "",
        "## Does the paper's direction hold at this scale?",
        "",
        *direction_markdown(report["direction"], m),
        "",
        "## Convergence acceleration",
        "",
        *acceleration_markdown(report["acceleration"]["valid"], "valid"),
        "",
        *acceleration_markdown(report["acceleration"]["train"], "train"),
        "",
        "### Steps to a fraction of the baseline's improvement (validation)",
        "",
        *fractions_markdown(report["fractions"]),
        "",
        "## Time cost and parameters (HT Table 7 style)",
        "",
        *time_markdown(report["time"]),
        "",
        *_gates_markdown(report["gates"]),
        "",
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
    for name, files in gates["heatmaps"].items():
        lines += [f"### {name}", "", *_image_lines(files, f"{name} gate biases"), ""]
    pca = gates["pca"]
    if "skipped" in pca:
        lines.append(f"*PCA skipped: {pca['skipped']}.*")
    else:
        lines += ["### PCA of the per-layer, per-sublayer bias vectors", ""]
        lines += _image_lines(pca["figure"], "PCA of gate biases")
    return lines


# --------------------------------------------------------------------------- entry point


def _convergence_figures(
    groups: dict[str, list[RunRecord]], metric: str, out_dir: Path, title: str
) -> dict[str, list[str]]:
    curves = {
        str(runs[0].experiment.get("row", name)): {
            split: {key: mean_curve(runs, split, key) for key in ("loss", metric)}
            for split in ("train", "valid")
        }
        for name, runs in groups.items()
    }
    figures = {}
    for axis in ("step", "time"):
        stem = out_dir / f"convergence_{'steps' if axis == 'step' else 'time'}"
        paths = plot_convergence(curves, metric, axis, stem, title)
        figures[stem.name] = [p.name for p in paths]
    return figures


def write_report(
    run_dirs: Iterable[str | Path],
    out_dir: str | Path,
    baselines: bool = False,
    data_path: str | None = None,
) -> dict[str, Any]:
    """Write the report folder for the runs of one table and scale; return ``report.json``.

    ``baselines``: add the lines to beat (:func:`trivial_baselines`, reading the runs' data
    from ``data_path`` when given, else where the runs read it)."""
    from ..experiments.registry import PAPER_FIGURES, TABLES
    from ..experiments.scale import SCALES, describe_scale

    loaded = [load_run(path) for path in find_run_dirs(run_dirs)]
    table, scale = check_one_table(loaded)
    # A run still training is no result: it is listed, and left out of every figure.
    runs = [r for r in loaded if r.progress is None]
    in_progress = [
        {"name": r.name, "seed": r.seed, "step": r.progress[0], "max_steps": r.progress[1]}
        for r in loaded
        if r.progress is not None
    ]
    if not runs:
        raise ConfigError(
            f"none of the {len(loaded)} runs has finished yet (the last logged steps are "
            f"{', '.join(str(r['step']) for r in in_progress)}); resume them with `highway run`"
        )
    out = make_folder(out_dir, "--out")
    groups = group_runs(runs)
    metric = str(runs[0].experiment.get("metric", "bpc"))
    baseline = runs[0].experiment.get("baseline")
    description = TABLES.get(table, (table, metric))[0]
    figures = _convergence_figures(groups, metric, out, f"{description} ({scale})")
    gates = gate_analysis(groups, out)
    paper_table = paper_rows(groups, metric)
    machines = runs_by_machine((f"{r.name} seed {r.seed}", r.results) for r in runs)
    timed = machines["time_comparable"]
    acceleration = {
        split: acceleration_rows(groups, split, baseline, timed) for split in ("valid", "train")
    }
    report: dict[str, Any] = {
        "table": table,
        "table_description": description,
        "paper_figures": PAPER_FIGURES.get(table, ""),
        "also_in": sorted({t for r in runs for t in r.experiment.get("also_in", [])}),
        "scale": scale,
        "scale_description": describe_scale(scale) if scale in SCALES else scale,
        "overrides": list(runs[0].experiment["overrides"]),
        "metric": metric,
        "runs": [
            {
                "run_dir": _portable(r.run_dir),
                "name": r.name,
                "seed": r.seed,
                "metadata": _metadata(r),
                "problems": r.problems,
            }
            for r in runs
        ],
        "paper_table": paper_table,
        "acceleration": acceleration,
        "fractions": fraction_rows(groups, baseline, FRACTIONS),
        "direction": direction_rows(groups, paper_table, acceleration["valid"], metric),
        "time": time_rows(groups, timed),
        "machines": machines,
        "gates": gates,
        "missing": [f"{r.name} seed {r.seed}: {p}" for r in runs for p in r.problems],
        "in_progress": in_progress,
        "baselines": trivial_baselines(runs[0], data_path) if baselines else None,
    }
    report["figures"] = {**figures, **_gate_figures(gates)}
    report["index"] = "index.md"
    (out / "index.md").write_text(index_markdown(report), encoding="utf-8")
    (out / "report.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return report


def trivial_baselines(run: RunRecord, data_path: str | None = None) -> dict[str, Any]:
    """The losses of the task's trivial models (``Task.baselines``) on the data ``run`` was
    trained on: ``{"models": {model: {split: {metric: value}}}}``, or ``{"not_computed":
    reason}`` when the data cannot be read."""
    from ..config import Config, build_config
    from ..tasks import task_baselines

    overrides = [f"data.path={data_path}"] if data_path else []
    try:
        config = build_config(Config(), run.run_dir / "config.yaml", overrides)
        return {"models": task_baselines(config)}
    except HighwayError as error:
        return {"not_computed": str(error)}


def baselines_markdown(baselines: dict[str, Any] | None, metric: str) -> list[str]:
    """The "Lines to beat" section: every trivial model's valid and test figure."""
    if baselines is None:
        return []
    lines = ["## Lines to beat", ""]
    if "not_computed" in baselines:
        return [*lines, f"Trivial baselines not computed: {baselines['not_computed']}", ""]
    lines += [
        "Trivial models estimated on the training split of the runs' data (`highway "
        "baselines`): a model that has learned more than they hold is "
        f"{'above' if higher_is_better(metric) else 'below'} them.",
        "",
        f"| trivial model | eval {metric} | test {metric} |",
        "| --- | ---: | ---: |",
    ]
    factor = 100 if metric in PERCENT_METRICS else 1
    digits = 4 if metric == "bpc" else 2  # as the results table prints them
    for model, by_split in baselines["models"].items():
        values = [_number(by_split.get(split, {}).get(metric)) for split in ("valid", "test")]
        cells = [_fmt(None if v is None else v * factor, digits) for v in values]
        lines.append(f"| {model} | {cells[0]} | {cells[1]} |")
    return [*lines, ""]


#: Run facts shown per run: results.json["metadata"] key -> column title.
METADATA_KEYS = {"threads": "threads", "device": "device", "precision": "precision",
                 "torch": "torch"}  # fmt: skip


def _metadata(run: RunRecord) -> dict[str, Any]:
    """Threads, device, precision, torch version and wall time of one run, where recorded
    (older results.json files have no ``metadata``: those facts read as None)."""
    results = run.results or {}
    recorded = results.get("metadata")
    recorded = recorded if isinstance(recorded, dict) else {}
    facts: dict[str, Any] = {key: recorded.get(key) for key in METADATA_KEYS}
    facts["precision"] = facts["precision"] or run.config.get("train", {}).get("precision")
    facts["train_seconds"] = results.get("train_seconds")
    stretches = results.get("stretches")
    facts["stretches"] = stretches if isinstance(stretches, list) else None
    return facts


def _portable(path: Path) -> str:
    """``path`` relative to the working directory when beneath it (reports get committed)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _gate_figures(gates: dict[str, Any]) -> dict[str, list[str]]:
    figures = {f"gates_{name}": files for name, files in gates["heatmaps"].items()}
    if "figure" in gates["pca"]:
        figures["gates_pca"] = gates["pca"]["figure"]
    return figures
