"""How long the runs left of a plan take here, from what the table's own runs measured.

Every run records each uninterrupted stretch of its training with the machine it ran on (in
``results.json`` once finished, in its checkpoint before). A row's seconds per step on *this*
kind of machine are the stretches of that row (any seed) that ran on one like it: same device,
instruction set, threads, precision and torch. Rates measured elsewhere are not used (an AVX2
and an AVX512 CPU differ 1.6x per step), so a row no stretch measured here has no estimate,
unless ``--plan --probe N`` trains it for a few steps here (:mod:`.probe`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import CheckpointError
from ..runtime.machine import duration, stretches_rate
from ..storage import runfolder


def _checkpoint_run_record(run_dir: Path) -> dict[str, Any]:
    """The run record of the run's checkpoint, checked as a resume checks it; {} when there is
    none or it cannot be trusted (a run writing it right now: the estimate skips it)."""
    from ..training.checkpoint import checkpoint_run_record  # torch: lazily

    try:
        return checkpoint_run_record(run_dir / "checkpoint")
    except CheckpointError:
        return {}


def recorded_stretches(run_dir: Path) -> list[dict[str, Any]]:
    """The stretches a run folder records: its results', else its checkpoint's."""
    results = runfolder.read_results(run_dir)
    stretches = results.get("stretches") if isinstance(results, dict) else None
    if not isinstance(stretches, list):
        stretches = _checkpoint_run_record(run_dir).get("stretches")
    return [s for s in stretches or [] if isinstance(s, dict)]


def machine_here(
    device: str, precision: str, threads: int, compile: str | bool = "auto"
) -> dict[str, Any]:
    """What a run started now would record about where it trains (``compile``: its
    ``train.compile``)."""
    from ..runtime.compiling import compiles  # torch: only when a plan is priced
    from ..runtime.device import resolve_device
    from ..runtime.hardware import run_metadata

    where = resolve_device(device)
    return {**run_metadata(where, precision, compiles(compile, where)), "threads": threads}


def seconds_per_step(run_dirs: Iterable[Path], here: dict[str, Any]) -> float | None:
    """Mean seconds per step over the stretches of these runs that ran here (None: none did)."""
    return stretches_rate((s for d in run_dirs for s in recorded_stretches(d)), here)


def finish_time(durations: list[float], jobs: int) -> float:
    """When the last of ``durations`` ends if they start in this order, each as soon as one
    of ``jobs`` slots is free (as the runner launches them)."""
    slots = [0.0] * max(jobs, 1)
    for seconds in durations:
        start = heapq.heappop(slots)
        heapq.heappush(slots, start + seconds)
    return max(slots)


def estimate_line(
    runs: list[tuple[str, int]],
    rates: dict[str, float | None],
    jobs: int,
    threads: int,
    probed: tuple[int, list[str]] = (0, []),
    earlier: list[str] | None = None,
) -> str:
    """The plan's closing line: the time the steps left take at the rates measured here.

    ``runs`` are (row, steps left) in the order the runner starts them; ``rates`` are keyed
    by row; ``jobs`` runs train at once (one long run left alone is not shortened by them);
    ``probed``: the probe's steps and the rows whose rate came from it (named, since a
    probe's rate is a short sample, not whole runs); ``earlier``: the rows whose rate an
    earlier probe on this kind of machine left in the per-user cache (:mod:`.rates`)."""
    todo = [(row, steps) for row, steps in runs if steps > 0]
    if not todo:
        return "nothing left to train"
    known = [steps * rates[row] for row, steps in todo if rates.get(row)]
    unknown = sorted({row for row, _ in todo if not rates.get(row)})
    where = f"{threads} thread{'s' if threads > 1 else ''} per run"
    if not known:
        return (
            f"no rate measured on this kind of machine yet ({where}): no time estimate "
            "(--probe N measures N steps of each row here)"
        )
    line = f"at the rates measured on this kind of machine ({where}): ≈ {duration(sum(known))}"
    line += " of training"
    if jobs > 1:
        line += f", ≈ {duration(finish_time(known, jobs))} with {jobs} at once"
    steps, rows = probed
    if rows:
        line += f"; probed here for {steps:,} steps, not whole runs: {', '.join(rows)}"
    if earlier:
        line += f"; from an earlier probe here, not whole runs: {', '.join(earlier)}"
    if unknown:
        line += f"; not yet measured here, so not counted (--probe N): {', '.join(unknown)}"
    return line
