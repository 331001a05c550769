"""The layout of a run folder, in one place (trainer, experiment runner, report, demo).

::

    config.yaml         the full configuration of the run
    metrics.jsonl       one record per log step or evaluation (written live)
    metrics.csv         the same records as a table (written live)
    checkpoint/         the last resumable state (weights, optimizer, RNG, task state)
    best/               the weights with the best validation loss
    results.json        valid/test metrics of the best weights, run metadata, wall time
    tensorboard/        TensorBoard events (with train.tensorboard=true)
    run.lock            the process training in the folder now (PID, host, start)
    experiment.json     a row of a paper table: what it reproduces (``highway run``)
    protocol_eval.json  that row's validation measured the paper's way (HT Table 5)
    train.log           the output of a row trained as a separate process

Every file name of a run folder is declared here, once; a checkpoint folder's are in
:mod:`~highway_transformer.storage.folder`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import Config, load_file

#: Keys the trainer fills in from the data: a planned value of 0 is a placeholder.
AUTOMATIC = frozenset({"model.vocab_size"})

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
RESULTS_FILE = "results.json"
CHECKPOINT_DIR = "checkpoint"
BEST_DIR = "best"
TENSORBOARD_DIR = "tensorboard"
LOCK_FILE = "run.lock"
EXPERIMENT_FILE = "experiment.json"
PROTOCOL_FILE = "protocol_eval.json"
LOG_FILE = "train.log"

#: What a run writes into its folder; any of them means the folder holds a run. (A
#: ``*.tmp`` checkpoint is an unfinished write, replaced by the next save: not a record;
#: ``*.old`` is a checkpoint whose swap was cut between its renames.)
RUN_RECORDS = (
    METRICS_FILE,
    METRICS_CSV,
    RESULTS_FILE,
    CHECKPOINT_DIR,
    f"{CHECKPOINT_DIR}.old",
    BEST_DIR,
    f"{BEST_DIR}.old",
)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": (1, 2)}}`` -> ``{"a.b": [1, 2]}`` (tuples as the YAML file holds them)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return out


def config_differences(
    run_dir: str | Path, config: Config, ignore: frozenset[str] = frozenset()
) -> list[tuple[str, Any, Any]]:
    """``(key, saved, planned)`` for every setting of the run folder's ``config.yaml`` that
    differs from ``config`` (none without the file; ConfigError where it is malformed);
    ``ignore`` and the placeholders of :data:`AUTOMATIC` are not compared.

    A setting the file lacks was added after the run trained: the run computed what the
    setting's default computes (a new setting's default keeps the old behaviour), so the
    file is read as holding the default.
    """
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        return []
    planned = flatten(config.to_dict())
    saved = flatten(Config().to_dict()) | flatten(load_file(path))
    return [
        (key, saved.get(key), planned.get(key))
        for key in sorted(set(saved) | set(planned))
        if key not in ignore
        and not (key in AUTOMATIC and not planned.get(key))
        and saved.get(key) != planned.get(key)
    ]


def gate_bias_values(model: Any) -> dict[str, list[float]]:
    """The learned gate biases b1 of ``model`` by name, as ``results.json`` records them
    (``{}`` for a model without gates)."""
    collect = getattr(model, "gate_biases", None)
    if not callable(collect):
        return {}
    return {name: bias.detach().float().cpu().ravel().tolist() for name, bias in collect().items()}


def _record_step(line: str) -> int:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 1 << 62


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; a truncated last line is skipped."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def truncate_metrics(run_dir: str | Path, step: int) -> None:
    """Drop the records after ``step`` (written after the checkpoint a run resumes from)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and _record_step(line) <= step
    ]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def write_results(run_dir: str | Path, results: dict[str, Any]) -> Path:
    path = Path(run_dir) / RESULTS_FILE
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return path


def read_results(run_dir: str | Path) -> dict[str, Any] | None:
    """``results.json`` of a finished run, or None (absent or unreadable)."""
    path = Path(run_dir) / RESULTS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
