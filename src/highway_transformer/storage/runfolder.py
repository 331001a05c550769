"""The layout of a run folder, in one place (trainer, experiment runner, report, demo).

::

    config.yaml         the full configuration of the run
    metrics.jsonl       one record per log step or evaluation (written live)
    metrics.csv         the same records as a table (written live)
    checkpoint/         the last resumable state (weights, optimizer, RNG, task state)
    checkpoints/        with train.keep_checkpoints=K > 1: the K - 1 checkpoints before it,
                        as step-000123/ (the step each resumes at), the oldest dropped
    best/               the weights with the best validation loss
    results.json        valid/test metrics of the best weights, run metadata, wall time
    tensorboard/        TensorBoard events (with train.tensorboard=true)
    run.lock            the process training in the folder now (PID, host, start)
    experiment.json     a row of a paper table: what it reproduces (``highway run``)
    protocol_eval.json  that row's validation measured the paper's way (HT Table 5)
    train.log           the output of a row trained as a separate process

Every file name of a run folder is declared here, once, but the names of its two checkpoint
folders (``checkpoint``, ``best``), which :mod:`~highway_transformer.storage.folder` declares
with a checkpoint folder's files (its errors name the other one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Config, load_file
from ..errors import ConfigError
from .folder import BEST_DIR, CHECKPOINT_DIR, STATE_FILE, fsync_dir

#: Keys the trainer fills in from the data: a planned value of 0 is a placeholder.
AUTOMATIC = frozenset({"model.vocab_size"})

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
RESULTS_FILE = "results.json"
ARCHIVE_DIR = "checkpoints"
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
    ARCHIVE_DIR,
    BEST_DIR,
    f"{BEST_DIR}.old",
)


#: An archived checkpoint's folder name (``step-000123``) and the names of one being deleted.
ARCHIVED = re.compile(r"step-(\d+)")
DROPPED_PREFIX = ".dropped-"


def archive_name(step: int) -> str:
    return f"step-{step:06d}"


def archived_checkpoints(run_dir: str | Path) -> list[Path]:
    """The older checkpoints kept in ``checkpoints/`` (``train.keep_checkpoints`` > 1),
    oldest first (by step)."""
    folder = Path(run_dir) / ARCHIVE_DIR
    if not folder.is_dir():
        return []
    found = [
        (int(match.group(1)), path)
        for path in folder.iterdir()
        if (match := ARCHIVED.fullmatch(path.name)) and path.is_dir()
    ]
    return [path for _, path in sorted(found)]


def archiver(run_dir: str | Path) -> Callable[[Path], None]:
    """What a save does with the whole checkpoint it replaced: rename it to
    ``checkpoints/step-N`` (N: the step it resumes at); one whose step cannot be read, or
    whose step is archived already, is deleted instead."""
    archive = Path(run_dir) / ARCHIVE_DIR

    def retire(old: Path) -> None:
        try:
            step = int(json.loads((old / STATE_FILE).read_text(encoding="utf-8"))["step"])
        except (OSError, ValueError, KeyError, TypeError):
            step = -1
        target = archive / archive_name(step)
        if step < 0 or target.exists():
            shutil.rmtree(old, ignore_errors=True)
            return
        archive.mkdir(exist_ok=True)
        os.replace(old, target)  # one rename: whole or not there
        fsync_dir(archive)
        fsync_dir(old.parent)

    return retire


def keep_archived(run_dir: str | Path, count: int) -> None:
    """Drop all but the newest ``count`` archived checkpoints (and ``checkpoints/`` when none
    is left). Each is renamed out of the ``step-N`` names before it is deleted, so a deletion
    cut short never leaves a partial folder that looks like a checkpoint."""
    archive = Path(run_dir) / ARCHIVE_DIR
    if not archive.is_dir():
        return
    for path in archive.iterdir():  # deletions cut short before
        if path.name.startswith(DROPPED_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
    kept = archived_checkpoints(run_dir)
    for path in kept[: max(len(kept) - count, 0)]:
        dropped = archive / (DROPPED_PREFIX + path.name)
        os.replace(path, dropped)
        shutil.rmtree(dropped, ignore_errors=True)
    if count == 0 and not any(archive.iterdir()):
        archive.rmdir()


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


def refuse_other_config(run_dir: Path, config: Config, holder: str = "") -> None:
    """Refuse to reuse a run folder trained with another configuration (e.g. more steps);
    ``holder`` names what holds it in the message (default: the folder was trained)."""
    differ = config_differences(run_dir, config)
    if differ:
        shown = ", ".join(f"{k}={found!r} (asked {asked!r})" for k, found, asked in differ[:3])
        what = f"{holder} with" if holder else f"{run_dir} was trained with"
        raise ConfigError(
            f"{what} another configuration: {shown}; choose another --out or remove the folder"
        )


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


def is_finished(run_dir: str | Path) -> bool:
    """Whether the run in ``run_dir`` finished (its ``results.json`` is written)."""
    return (Path(run_dir) / RESULTS_FILE).is_file()


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a checkpoint to resume (or one cut between its swap's renames,
    which the resumed run puts back)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    return folder.exists() or folder.with_name(f"{CHECKPOINT_DIR}.old").exists()


def read_results(run_dir: str | Path) -> dict[str, Any] | None:
    """``results.json`` of a finished run, or None (absent or unreadable)."""
    path = Path(run_dir) / RESULTS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
