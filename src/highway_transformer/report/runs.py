"""The one reader of run folders (``highway report``'s run sets, ``highway compare``'s
labelled ``highway train`` folders): what each holds, what it lacks, which table it is.

A folder holds ``experiment.json`` (not a ``highway train`` one), ``config.yaml``,
``metrics.jsonl``, ``results.json`` and ``protocol_eval.json``. A missing file, or a last
metrics line cut short by a run writing it now, is recorded as the run's problem; a run still
training (no ``results.json``, metrics short of ``max_steps``) is marked in progress. A file
that is there but malformed (not JSON or YAML, a value of the wrong type, a garbage line) is
refused with one line naming the file: a report never reads a damaged run into its tables. A
run whose numbers cannot be used (:func:`unusable_reason`: a NaN or infinite value, or the
last metrics line of a finished run cut short) is marked ``unusable``: no statistic reads it
(a report leaves it out, a comparison refuses it).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..data.levels import corpus_level
from ..errors import ConfigError, DataError
from ..experiments.registry import EXPERIMENTS
from ..storage import runfolder
from ..storage.runfolder import EXPERIMENT_FILE, PROTOCOL_FILE, flatten
from .annealing import rate_changes
from .convergence import curve


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
    # Why no statistic may read this run (file and defect, :func:`unusable_reason`), or None.
    unusable: str | None = None
    # Its name in a comparison (:func:`run_labels`); "" for a run of an experiment.
    label: str = ""

    @property
    def name(self) -> str:
        """The experiment's name; a ``highway train`` folder's label (it has no experiment)."""
        return str(self.experiment.get("name", self.label))

    @property
    def seed(self) -> int:
        return int(self.experiment.get("seed", 1))

    @property
    def flat(self) -> dict[str, Any]:
        """``config.yaml`` as dotted keys (``data.corpus``)."""
        return flatten(self.config)

    @property
    def task(self) -> str:
        """The task it trained (``lm`` where the config names none)."""
        task = self.config.get("task", {})
        return str(task.get("name", "lm")) if isinstance(task, dict) else "lm"

    @property
    def level(self) -> str:
        """A language model's vocabulary level: as ``results.json`` records it, else its
        corpus's (:func:`~..data.levels.corpus_level`)."""
        return (self.results or {}).get("level") or corpus_level(self.config.get("data", {}))

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


def malformed(path: Path, what: str) -> ConfigError:
    """The one-line refusal of a damaged run file: which file, what is wrong, what to do."""
    return ConfigError(
        f"{path} is malformed ({what}); a damaged run is never reported: train it again "
        f"or leave {path.parent} out"
    )


def _text(path: Path) -> str:
    """A run file's text; unreadable, binary or not UTF-8 is a one-line ConfigError."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise malformed(path, "a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed(path, f"not UTF-8 text at byte {exc.start}") from None


def read_run_json(path: Path) -> dict[str, Any] | None:
    """A run folder's JSON object; None when the file is absent."""
    if not path.exists():
        return None
    try:
        data = json.loads(_text(path))
    except (json.JSONDecodeError, RecursionError):
        raise malformed(path, "not JSON, or truncated") from None
    if not isinstance(data, dict):
        raise malformed(path, f"a JSON {type(data).__name__}, not an object")
    return data


def number(value: Any) -> float | None:
    """A finite-or-infinite real from a JSON value; None for anything else (text, bools)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _is_number(value: Any) -> bool:
    return number(value) is not None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _figures(value: Any) -> bool:
    """Named metrics (``{"loss": 1.2, "tokens": 300}``): numbers, or None where not measured."""
    return isinstance(value, dict) and all(v is None or _is_number(v) for v in value.values())


def _facts(value: Any) -> bool:
    """Machine and code facts (``metadata``, one stretch): names and plain values."""
    return isinstance(value, dict) and all(_is_scalar(v) for v in value.values())


def _final(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and (value.get("step") is None or isinstance(value.get("step"), int))
        and all(value.get(s) is None or _figures(value.get(s)) for s in ("valid", "test"))
    )


def _learned(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    numbers = ("loss", "baseline_loss", "gap", "margin")
    return (
        all(value.get(k) is None or _is_number(value.get(k)) for k in numbers)
        and isinstance(value.get("learned", False), bool)
        and _is_scalar(value.get("baseline"))
        and (value.get("baselines") is None or _figures(value.get("baselines")))
    )


def _gate_biases(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, list) and all(_is_number(x) for x in v) for v in value.values()
    )


#: What each value of ``results.json`` must be, where the file has it (None: not recorded).
RESULT_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    **{k: ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
       for k in ("steps", "best_step", "train_tokens", "processes")},
    **{k: ("a number", _is_number)
       for k in ("parameters", "train_seconds", "tokens_per_second")},
    **{k: ("a text", lambda v: isinstance(v, str)) for k in ("name", "task", "headline", "level")},
    "valid": ("an object of numbers", _figures),
    "test": ("an object of numbers", _figures),
    "final": ("an object with step, valid and test figures", _final),
    "metadata": ("an object of plain values", _facts),
    "stretches": ("a list of objects of plain values",
                  lambda v: isinstance(v, list) and all(_facts(x) for x in v)),
    "gate_biases": ("an object of lists of numbers", _gate_biases),
    "learned": ("an object of the learning check's figures", _learned),
}  # fmt: skip
#: The same of ``protocol_eval.json``.
PROTOCOL_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "protocol": ("a text", lambda v: isinstance(v, str)),
    "overrides": ("a list of texts", lambda v: isinstance(v, list)
                  and all(isinstance(x, str) for x in v)),
    "valid": ("an object of numbers", _figures),
}  # fmt: skip


def check_fields(data: dict[str, Any] | None, path: Path, fields: dict) -> None:
    """Refuse a value of ``data`` (read from ``path``) of the wrong type, naming it."""
    for key, (kind, fits) in fields.items():
        value = (data or {}).get(key)
        if value is not None and not fits(value):
            raise malformed(path, f"{key} must be {kind}, got {json.dumps(value)[:40]}")


def _check_record(record: Any) -> str | None:
    """What is wrong with one metrics record, or None: an object with a whole-number step, a
    split name, and numbers (None where not measured)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    step, split = record.get("step"), record.get("split")
    if isinstance(step, bool) or not isinstance(step, int):
        return f"step must be a whole number, got {json.dumps(step)[:40]}"
    if not isinstance(split, str):
        return f"split must be a text, got {json.dumps(split)[:40]}"
    for key, value in record.items():
        if key not in ("step", "split") and value is not None and not _is_number(value):
            return f"{key} must be a number, got {json.dumps(value)[:40]}"
    return None


#: The problem noted for a last metrics line cut short (:func:`read_run_metrics`).
CUT_SHORT = "metrics.jsonl: its last line is cut short (a run writing it?)"


def read_run_metrics(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; a last line cut short (no line end: a run writing it
    now, or stopped while writing) is skipped and noted, any other bad line refused."""
    if not path.is_file():
        problems.append("metrics.jsonl missing: no curves")
        return []
    lines = _text(path).split("\n")  # the last item is "" after a complete last line
    records = []
    for number_, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            wrong = _check_record(record)
        except (json.JSONDecodeError, RecursionError):
            record, wrong = None, "not JSON"
        if wrong is None:
            records.append({k: v for k, v in record.items() if v is not None})
        elif number_ == len(lines):  # no line end after it: cut short while being written
            problems.append(CUT_SHORT)
        else:
            raise malformed(path, f"line {number_}: {wrong}")
    return records


def non_finite(value: Any, key: str = "") -> str | None:
    """``KEY is NaN`` (or ``Infinity``) for the first non-finite number in a JSON value, its
    dotted key named; None when every number is finite. JSON has no NaN: Python writes one."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{key or 'a value'} is {json.dumps(value)}"
    if not isinstance(value, dict | list):
        return None
    for name, child in value.items() if isinstance(value, dict) else enumerate(value):
        found = non_finite(child, f"{key}.{name}" if key else str(name))
        if found:
            return found
    return None


def unusable_reason(
    run_dir: Path,
    results: dict[str, Any] | None,
    records: list[dict[str, Any]],
    problems: list[str],
    protocol: dict[str, Any] | None = None,
) -> str | None:
    """Why no statistic may read a run, naming the file and the defect; None when it may.

    A NaN or infinite value anywhere (a run that diverged writes its last validation record
    as NaN; a finished run never records one), or a last metrics line cut short although
    ``results.json`` says the run finished: nothing is writing that file, so it was damaged
    and what else it lost is unknown. (A cut line without ``results.json`` is a run writing
    it now: a problem noted, not a defect.)"""
    for name, data in ((runfolder.RESULTS_FILE, results), (PROTOCOL_FILE, protocol)):
        found = non_finite(data)
        if found:
            return f"{run_dir / name}: {found}"
    for record in records:
        found = non_finite(record)
        if found:
            at = f"step {record['step']} ({record['split']})"
            return f"{run_dir / runfolder.METRICS_FILE}: {found} at {at}, the run diverged"
    if results is not None and CUT_SHORT in problems:
        return (
            f"{run_dir / runfolder.METRICS_FILE}: its last line is cut short, though "
            "results.json says the run finished (the file was damaged)"
        )
    return None


def _read_config(path: Path, problems: list[str]) -> dict[str, Any]:
    """``config.yaml`` as nested mappings; a missing file is a problem, a malformed one is
    refused."""
    if not path.is_file():
        problems.append("config.yaml missing")
        return {}
    try:
        loaded = yaml.safe_load(_text(path))
    except (yaml.YAMLError, RecursionError):
        raise malformed(path, "not YAML") from None
    if not isinstance(loaded, dict):
        raise malformed(path, "not a mapping of config sections")
    for section in ("model", "data", "train", "task"):
        if not isinstance(loaded.get(section, {}), dict):
            raise malformed(path, f"{section} is not a mapping")
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


def load_run(run_dir: str | Path, label: str = "") -> RunRecord:
    """Read one run folder; anything missing, or a metrics line being written, is noted in
    ``problems``; a malformed file is a one-line ConfigError naming it. ``label``: its name in
    a comparison, where ``experiment.json`` may be absent (a ``highway train`` folder)."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    path = run_dir / EXPERIMENT_FILE
    experiment: dict[str, Any] = {}  # a highway train folder: no experiment
    if not label or path.exists():
        experiment = _with_registry_defaults(_check_experiment(read_run_json(path), path))
    config = _read_config(run_dir / runfolder.CONFIG_FILE, problems)
    path = run_dir / runfolder.RESULTS_FILE
    results = read_run_json(path)
    check_fields(results, path, RESULT_FIELDS)
    for split in ("valid", "test"):
        if results is not None and results.get(split) is None:
            problems.append(f"results.json has no {split} figures")
    records = read_run_metrics(run_dir / runfolder.METRICS_FILE, problems)
    run = RunRecord(run_dir, experiment, config, results, records, problems, label=label)
    path = run_dir / PROTOCOL_FILE
    run.protocol = read_run_json(path)
    check_fields(run.protocol, path, PROTOCOL_FIELDS)
    _check_complete(run)
    run.unusable = unusable_reason(run_dir, results, records, problems, run.protocol)
    if run.unusable:
        run.progress = None  # a diverged or damaged run is not one still training
    return run


@dataclass
class RunSet:
    """The run folders of one report, read: those a statistic may read, and the rest."""

    loaded: list[RunRecord]

    @property
    def runs(self) -> list[RunRecord]:
        """The finished, usable runs: every number and figure reads these only."""
        return [r for r in self.loaded if r.progress is None and r.unusable is None]

    @property
    def in_progress(self) -> list[dict[str, Any]]:
        return [{"name": r.name, "seed": r.seed, "step": r.progress[0],
                 "max_steps": r.progress[1]} for r in self.loaded if r.progress]  # fmt: skip

    @property
    def unusable(self) -> list[dict[str, Any]]:
        return [{"name": r.name, "seed": r.seed, "reason": r.unusable}
                for r in self.loaded if r.unusable]  # fmt: skip


def load_run_set(paths: Iterable[str | Path]) -> RunSet:
    """The run folders among ``paths`` (:func:`find_run_dirs`), each read by :func:`load_run`."""
    return RunSet([load_run(path) for path in find_run_dirs(paths)])


def run_labels(run_dirs: list[Path]) -> list[str]:
    """Each run's folder name, or where runs share one the fewest trailing path parts that
    tell it from every other (``x/run``, ``y/run``): short enough for a legend."""
    parts = [d.parts for d in run_dirs]

    def label(i: int) -> str:
        mine = parts[i]
        for n in range(1, len(mine) + 1):
            if all(other[-n:] != mine[-n:] for j, other in enumerate(parts) if j != i):
                return "/".join(mine[-n:])
        return str(run_dirs[i])  # a path that ends another's: the whole path

    return [label(i) for i in range(len(parts))]


def load_compared(run_dir: Path, label: str) -> RunRecord:
    """One run folder of a comparison, with at least one validation record; a malformed file,
    or numbers no statistic may read (:func:`unusable_reason`), are refused naming the file.
    Each row is one named run, so leaving one out would change the comparison asked for: it
    is refused whole, a metrics line being written too."""
    run = load_run(run_dir, label)
    if not curve(run.records, "valid"):
        raise DataError(
            f"{run_dir} has no validation records in metrics.jsonl; give folders written by "
            "`highway train` (or the demo) that reached at least one evaluation"
        )
    unusable = run.unusable
    if unusable is None and CUT_SHORT in run.problems:  # no "in progress" here: a cut is a cut
        unusable = (
            f"{run_dir / runfolder.METRICS_FILE}: its last line is cut short (a run writing it? "
            "compare once it has finished)"
        )
    if unusable:
        raise DataError(
            f"{unusable}; its numbers are not usable, so nothing is compared: leave {run_dir} "
            "out or train it again"
        )
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
