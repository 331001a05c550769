"""The run folders a report reads: what each holds, what it lacks, and which table it is.

Reads the run folders written by :func:`highway_transformer.experiments.run_experiments`
(``experiment.json``, ``config.yaml``, ``metrics.jsonl``, ``results.json``,
``protocol_eval.json``). Missing or truncated files are recorded as the run's problems, never
raised; a run still training (no ``results.json``, metrics short of ``max_steps``) is marked
in progress.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..experiments.registry import EXPERIMENTS
from ..files import read_text
from ..storage import runfolder
from ..storage.runfolder import EXPERIMENT_FILE, PROTOCOL_FILE
from .annealing import rate_changes


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


def number(value: Any) -> float | None:
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
        kept = {k: number(v) for k, v in figures.items() if number(v) is not None}
        if len(kept) < len(figures):
            problems.append(f"results.json: non-numeric {split} figures ignored")
        clean[split] = kept
    final = results.get("final")
    if isinstance(final, dict):  # the last weights' whole-split scores
        clean["final"] = {
            split: {k: number(v) for k, v in final[split].items() if number(v) is not None}
            for split in ("valid", "test")
            if isinstance(final.get(split), dict)
        }
    elif final is not None:
        problems.append("results.json: malformed final figures ignored")
        del clean["final"]
    return clean


def _clean_record(record: Any) -> dict[str, Any] | None:
    """A metrics record with an integer step, a split name and numeric values, or None."""
    if not isinstance(record, dict):
        return None
    step, split = record.get("step"), record.get("split")
    if isinstance(step, bool) or not isinstance(step, int) or not isinstance(split, str):
        return None
    numbers = {k: number(v) for k, v in record.items() if k not in ("step", "split")}
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
    """Runs by experiment name, rows in registry order (rows not registered: the baseline
    first, then by name), seeds in order."""
    order = {name: i for i, name in enumerate(EXPERIMENTS)}

    def key(r: RunRecord) -> tuple[int, bool, str, int]:
        return order.get(r.name, len(order)), r.name != r.experiment.get("baseline"), r.name, r.seed

    groups: dict[str, list[RunRecord]] = {}
    for run in sorted(runs, key=key):
        groups.setdefault(run.name, []).append(run)
    return groups


#: Run facts shown per run: results.json["metadata"] key -> column title.
METADATA_KEYS = {"threads": "threads", "device": "device", "precision": "precision",
                 "torch": "torch"}  # fmt: skip


def run_facts(run: RunRecord) -> dict[str, Any]:
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
    facts["rate_changes"] = rate_changes(run)
    return facts


def portable_path(path: Path) -> str:
    """``path`` relative to the working directory when beneath it (reports get committed)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
