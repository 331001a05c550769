"""``highway prune``: drop the weights of finished runs once nothing needs them.

A table's run folders travel (committed, copied back from a GPU or cluster machine) far more
easily without their weights: a finished run's report reads ``results.json``, the metrics and,
for HT Table 5 rows, ``protocol_eval.json``. The weights (``best/``, ``checkpoint/``, the older
checkpoints of ``checkpoints/`` and a ``checkpoint.old/`` left by a cut swap) are dropped only
when every one of those is there:

* the run finished (``results.json``; an interrupted run needs its checkpoint to resume);
* ``results.json`` holds the gate biases of its best weights (older runs did not record them:
  results/README.md adds them from ``best/`` first);
* a row validated the paper's way as well (HT Table 5) has measured it;
* no process holds the folder's run lock (a finished run resumed to train further).

Anything else is kept, with the reason.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..storage import runfolder
from ..training.runlock import holder
from .registry import EXPERIMENTS

WEIGHTS = (
    runfolder.BEST_DIR,
    runfolder.CHECKPOINT_DIR,
    runfolder.ARCHIVE_DIR,
    f"{runfolder.CHECKPOINT_DIR}.old",
)


@dataclass(frozen=True)
class PruneDecision:
    run_dir: Path
    weights: tuple[Path, ...]  # what would go
    keep_reason: str = ""  # why nothing goes; "" when the weights may go

    @property
    def prunable(self) -> bool:
        return not self.keep_reason and bool(self.weights)


def _row_needs_protocol(run_dir: Path) -> bool:
    try:
        name = json.loads((run_dir / runfolder.EXPERIMENT_FILE).read_text(encoding="utf-8"))["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    experiment = EXPERIMENTS.get(str(name))
    return bool(experiment and experiment.eval_overrides)


def decide(run_dir: Path) -> PruneDecision:
    """Whether ``run_dir``'s weights may go, and which they are."""
    weights = tuple(run_dir / name for name in WEIGHTS if (run_dir / name).exists())
    results = runfolder.read_results(run_dir)
    busy = holder(run_dir)
    if busy:  # e.g. a finished run resumed to train further
        reason = f"in use by {busy}"
    elif results is None:
        reason = "not finished (no results.json): its checkpoint resumes it"
    elif not isinstance(results.get("gate_biases"), dict):
        reason = "results.json records no gate biases: add them from best/ first"
    elif _row_needs_protocol(run_dir) and not (run_dir / runfolder.PROTOCOL_FILE).is_file():
        reason = "its validation the paper's way is not measured yet: run `highway run` again"
    else:
        reason = ""
    return PruneDecision(run_dir, weights, reason)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def prune(
    run_dirs: Iterable[Path], dry_run: bool = False, log: Callable[[str], None] = print
) -> list[PruneDecision]:
    """Drop the weights of each finished run that no longer needs them (``dry_run``: say
    what would go, remove nothing); log every run's decision and the bytes freed."""
    decisions = [decide(Path(d)) for d in run_dirs]
    freed = 0
    for d in decisions:
        if d.keep_reason:
            if d.weights:
                log(f"kept {d.run_dir}: {d.keep_reason}")
            continue
        for path in d.weights:
            freed += _size(path)
            if not dry_run:
                shutil.rmtree(path)
        if d.weights:
            names = ", ".join(p.name for p in d.weights)
            log(f"{'would drop' if dry_run else 'dropped'} {names} of {d.run_dir}")
    count = sum(d.prunable for d in decisions)
    verb = "would free" if dry_run else "freed"
    log(f"{count} of {len(decisions)} run(s) pruned: {verb} {freed / 2**20:,.1f} MiB")
    return decisions
