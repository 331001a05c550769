"""``highway report``: one folder of figures and tables from experiment run folders.

Reads the run folders written by :func:`highway_transformer.experiments.run_experiments`
(``experiment.json``, ``config.yaml``, ``metrics.jsonl``, ``results.json``, ``best/``) of one
table at one scale and writes:

* ``convergence_steps.svg`` and ``convergence_time.svg``: training and
  validation loss and bpc/perplexity against steps and training seconds, one line per row
  (the mean over seeds at each logged step; no time figure when the runs trained on several
  kinds of machine, :mod:`.machines`);
* the table's registered comparison (:mod:`.primary`), which alone decides its verdicts:
  every other view below is exploratory;
* the paper-format table (eval = validation split), improvements over the row's baseline
  marked ⇓ with the relative change, the published figures and their change side by side,
  mean ± sample standard deviation over seeds;
* the claims that set one row against another rather than the baseline (the registry's
  ``CONTRASTS``: HT Table 5's where-to-gate findings, gated vs parameter-matched plain),
  *row − other* paired by seed with a 95% t-interval, beside the published difference;
* for rows whose rate is annealed on validation (:mod:`.annealing`), each row against its
  baseline once more at the last periodic validation before either run of a seed annealed,
  and each run's rate changes in the runs table;
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

Runs are compared only when they were all trained by one recorded version of the code
(:mod:`.code`; ``allow_mixed_code`` writes the report anyway, saying so at its top). Runs
with missing or truncated files are reported with what they have; what is missing is
listed in ``index.md`` and ``report.json``. A run still training (no ``results.json``, metrics
short of ``max_steps``) is no result: it is listed as in progress and left out of every
number and figure, so a table reported part-way compares finished runs only. A run whose
numbers are not usable (a NaN or infinite value, a finished run's metrics cut short:
:func:`~.runs.unusable_reason`) is flagged at the top of ``index.md`` and left out the same way.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..data.levels import metric_label
from ..errors import CheckpointError, ConfigError, HighwayError
from ..experiments.registry import CONTRASTS, PAPER_FIGURES, TABLES
from ..experiments.scale import AS_CONFIGURED, SCALES, describe_scale
from ..files import make_folder
from ..tasks.floor import learning_hint
from .analysis import analysis_rows
from .annealing import before_annealing
from .code import describe_groups, runs_by_code
from .figures import plot_convergence, plot_gate_heatmaps, plot_pca
from .gates import bias_matrices, load_gate_biases, pca_embedding, split_name
from .machines import runs_by_machine
from .markdown import index_markdown
from .primary import primary_comparison
from .runs import RunRecord, check_one_table, group_runs, load_run_set, portable_path, run_facts
from .stats import FRACTIONS, learned_check, withhold_verdicts
from .success import success_rows
from .tables import (
    acceleration_rows,
    contrast_rows,
    direction_rows,
    fraction_rows,
    mean_curve,
    paper_rows,
    seed_band,
    time_rows,
)


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


def _convergence_figures(
    groups: dict[str, list[RunRecord]],
    metric: str,
    out_dir: Path,
    title: str,
    timed: bool,
    baselines: dict[str, Any] | None = None,
) -> dict[str, list[str]]:
    """Curves (mean over seeds, the seeds' range as a band, the trivial models as lines)
    against steps and, when the runs' seconds compare (``timed``), against training seconds;
    an untimed report drops a time figure left by an earlier one."""
    curves, bands = {}, {}
    for name, runs in groups.items():
        row = str(runs[0].experiment.get("row", name))
        keys, splits = ("loss", metric), ("train", "valid")
        curves[row] = {s: {k: mean_curve(runs, s, k) for k in keys} for s in splits}
        bands[row] = {s: {k: seed_band(runs, s, k) for k in keys} for s in splits}
    models = (baselines or {}).get("models", {})
    lines_to_beat = {
        key: {m: by["valid"][key] for m, by in models.items() if key in by.get("valid", {})}
        for key in ("loss", metric)
    }
    figures = {}
    for axis in ("step", "time"):
        stem = out_dir / f"convergence_{'steps' if axis == 'step' else 'time'}"
        if axis == "time" and not timed:
            for stale in out_dir.glob(f"{stem.name}.*"):
                stale.unlink()
            figures[stem.name] = []
            continue
        paths = plot_convergence(curves, metric, axis, stem, title, bands, lines_to_beat)
        figures[stem.name] = [p.name for p in paths]
    return figures


def write_report(
    run_dirs: Iterable[str | Path],
    out_dir: str | Path,
    baselines: bool = False,
    data_path: str | None = None,
    allow_mixed_code: bool = False,
) -> dict[str, Any]:
    """Write the report folder for the runs of one table and scale; return ``report.json``.

    ``baselines``: add the lines to beat (:func:`trivial_baselines`, reading the runs' data
    from ``data_path`` when given, else where the runs read it); ``allow_mixed_code``: write it
    although the runs did not all record one version of the code (:mod:`.code`)."""
    run_set = load_run_set(run_dirs)
    loaded = run_set.loaded
    table, scale = check_one_table(loaded)
    # A run still training, or one whose numbers are not usable (NaN, a damaged file), is
    # no result: it is listed first, and left out of every number and figure.
    runs, in_progress, unusable = run_set.runs, run_set.in_progress, run_set.unusable
    if unusable and not runs:
        raise ConfigError(
            f"none of the {len(loaded)} runs is usable: {unusable[0]['reason']}; train them "
            "again or leave them out"
        )
    if not runs:
        raise ConfigError(
            f"none of the {len(loaded)} runs has finished yet (the last logged steps are "
            f"{', '.join(str(r['step']) for r in in_progress)}); resume them with `highway run`"
        )
    code = runs_by_code((f"{r.name} seed {r.seed}", r.results) for r in runs)
    if not code["one_code"] and not allow_mixed_code:
        raise ConfigError(
            f"the runs were not all trained by one recorded version of the code "
            f"({describe_groups(code).replace('*', '')}); a difference between rows could then "
            "be a change of the code: train them with one version, or pass --allow-mixed-code "
            "to write the report anyway (it says so at its top)"
        )
    out = make_folder(out_dir, "--out")
    groups = group_runs(runs)
    metric = str(runs[0].experiment.get("metric", "bpc"))
    baseline = runs[0].experiment.get("baseline")
    description = TABLES[table][0] if table in TABLES else _own_description(table, groups)
    machines = runs_by_machine((f"{r.name} seed {r.seed}", r.results) for r in runs)
    timed = machines["time_comparable"]
    found_baselines = trivial_baselines(runs[0], data_path) if baselines else None
    figures = _convergence_figures(
        groups, metric, out, f"{description} ({scale})", timed, found_baselines
    )
    gates = gate_analysis(groups, out)
    paper_table = paper_rows(groups, metric)
    acceleration = {
        split: acceleration_rows(groups, split, baseline, timed) for split in ("valid", "train")
    }
    report: dict[str, Any] = {
        "table": table,
        "table_description": description,
        "paper": table in TABLES,  # False: rows of no paper (``highway ab``): no published columns
        "paper_figures": PAPER_FIGURES.get(table, ""),
        "also_in": sorted({t for r in runs for t in r.experiment.get("also_in", [])}),
        "scale": scale,
        "scale_description": (
            describe_scale(scale) if scale in SCALES or scale == AS_CONFIGURED else scale
        ),
        "overrides": list(runs[0].experiment["overrides"]),
        "metric": metric,
        "metric_label": run_metric_label(runs[0], metric),
        "runs": [
            {
                "run_dir": portable_path(r.run_dir),
                "name": r.name,
                "seed": r.seed,
                "metadata": run_facts(r),
                "problems": r.problems,
            }
            for r in runs
        ],
        "primary": primary_comparison(groups, table),
        "paper_table": paper_table,
        "contrasts": contrast_rows(paper_table, CONTRASTS.get(table, ()), metric),
        "before_annealing": before_annealing(groups, paper_table, metric),
        "acceleration": acceleration,
        "fractions": fraction_rows(groups, baseline, FRACTIONS),
        "direction": direction_rows(groups, paper_table, acceleration["valid"], metric),
        "time": time_rows(groups, timed),
        "machines": machines,
        "code": code,
        "gates": gates,
        "missing": [
            *(f"{r['name']} seed {r['seed']}: not usable, {r['reason']}" for r in unusable),
            *(f"{r.name} seed {r.seed}: {p}" for r in runs for p in r.problems),
        ],
        "in_progress": in_progress,
        "unusable": unusable,
        "baselines": found_baselines,
    }
    if metric == "success":  # the rl task's training scores; other tables' outputs unchanged
        report["success"] = success_rows(groups, baseline)
    report["learning"] = learning_rows(runs, report["baselines"])
    withhold_verdicts(report["primary"], report["learning"], metric, report["metric_label"])
    analyses = analysis_rows(groups, out)
    if analyses:  # only where runs were analysed: other reports stay as they were
        report["analyses"] = analyses
    drawn = {
        f"analysis_{name}": row["figures"] for name, row in analyses.items() if "figures" in row
    }
    report["figures"] = {**figures, **_gate_figures(gates), **drawn}
    report["index"] = "index.md"
    (out / "index.md").write_text(index_markdown(report), encoding="utf-8")
    (out / "report.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return report


def _own_description(table: str, groups: dict[str, list[RunRecord]]) -> str:
    """``ab: plain (baseline), sigmoid``: a table no paper has (``highway ab``)."""
    rows = []
    for name, runs in groups.items():
        row = str(runs[0].experiment.get("row", name))
        rows.append(f"{row} (baseline)" if name == runs[0].experiment.get("baseline") else row)
    return f"{table}: {', '.join(rows)}"


def trivial_baselines(run: RunRecord, data_path: str | None = None) -> dict[str, Any]:
    """The losses of the task's trivial models (``Task.baselines``) on the data ``run`` was
    trained on: ``{"models": {model: {split: {metric: value}}}}``, or ``{"not_computed":
    reason}`` when the data cannot be read."""
    from ..config import Config
    from ..tasks import task_baselines
    from ..validation import build_config

    overrides = [f"data.path={data_path}"] if data_path else []
    try:
        config = build_config(Config(), run.run_dir / "config.yaml", overrides)
        return {"models": task_baselines(config)}
    except HighwayError as error:
        return {"not_computed": str(error)}


def run_metric_label(run: RunRecord, metric: str) -> str:
    """``metric`` as a person reads it for ``run``'s data (``bpb`` for a byte-level model,
    :mod:`..data.levels`), for ``highway ab``'s printout; the report's tables keep the papers'
    names (they call enwik8's bits per byte "bpc")."""
    return metric if run.task != "lm" else metric_label(metric, run.level)


def learning_rows(runs: list[RunRecord], baselines: dict[str, Any] | None) -> list[dict]:
    """Each run's check against the trivial baselines (:mod:`..tasks.floor`): as the trainer
    recorded it, against the report's baselines too where it has them (the best trivial model
    at hand: the trigram, logistic regression), with what to try from the run's settings."""
    models = (baselines or {}).get("models")
    rows = []
    for run in runs:
        results = run.results or {}
        recorded = results.get("learned")
        check = learned_check(results, models)
        source = (
            "recorded" if check is recorded
            else "from the report's baselines" if recorded is None
            else "recorded, with the report's baselines"
        )  # fmt: skip
        rows.append({
            "name": run.name, "seed": run.seed, "check": check, "source": source,
            "hint": learning_hint(run.flat),
        })  # fmt: skip
    return rows


def _gate_figures(gates: dict[str, Any]) -> dict[str, list[str]]:
    figures = {f"gates_{name}": files for name, files in gates["heatmaps"].items()}
    if "figure" in gates["pca"]:
        figures["gates_pca"] = gates["pca"]["figure"]
    return figures
