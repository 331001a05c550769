"""The layout of a run folder, in one place (trainer, experiment runner, report, demo).

::

    config.yaml      the full configuration of the run
    metrics.jsonl    one record per log step or evaluation (written live)
    metrics.csv      the same records as a table (written live)
    checkpoint/      the last resumable state (weights, optimizer, RNG, task state)
    best/            the weights with the best validation loss
    results.json     valid/test metrics of the best weights, run metadata, wall time
    tensorboard/     TensorBoard events (when tensorboard is installed)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
RESULTS_FILE = "results.json"
CHECKPOINT_DIR = "checkpoint"
BEST_DIR = "best"
TENSORBOARD_DIR = "tensorboard"


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
