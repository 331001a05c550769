"""Run named experiments: every (row, seed) of a request, here or as cluster jobs, resumable.

The runs and their folders are planned by :mod:`.plan`; they train in this process
(``--jobs 1``), as processes of this machine (:mod:`.jobs`) or as submitit jobs
(:mod:`.slurm`). Re-running skips finished runs (``results.json`` present) and resumes
interrupted ones (``checkpoint/`` present) before any run starts afresh. Local runners of
one request may run at once (here or on machines sharing the folders): each skips the runs
another trains.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import ConfigError, ExperimentFailed, TrainingInterrupted, unknown_choice
from .comparisons import Comparison
from .jobs import PROTOCOL, Job, run_inline, run_parallel, stopped_at_checkpoint
from .plan import (
    RunSpec,
    check_existing,
    launch_order,
    plan_runs,
    threads_per_job,
    write_experiment_file,
)
from .protocols import measure_protocol, measured_line, needs_protocol
from .registry import Experiment
from .slurm import JobSettings, run_submitted

__all__ = ["LAUNCHERS", "ExperimentFailed", "JobSettings", "run_experiments", "run_planned"]

#: Where rows train: ``local`` (this machine, --jobs at once), ``slurm`` (one Slurm job a
#: row, through submitit) or ``submitit-local`` (the same jobs on this machine, for trying it).
LAUNCHERS = ("local", "slurm", "submitit-local")


def run_experiments(
    names_or_table: str | Iterable[str | Experiment],
    out_root: str | Path,
    scale: str,
    seeds: int = 1,
    jobs: int = 1,
    data_path: str | Path | None = None,
    overrides: Iterable[str] = (),
    log: Callable[[str], None] | None = None,
    progress: bool = False,
    launcher: str = "local",
    job: JobSettings | None = None,
    comparison: Comparison | None = None,
    trust_unverified: bool = False,
) -> list[Path]:
    """Train every (row, seed) of the request; return all their run folders.

    Finished runs are skipped, interrupted ones resumed before any run starts afresh
    (:func:`launch_order`). ``jobs > 1`` trains that many runs
    at once, each as a ``python -m highway_transformer.cli train`` process logging to
    ``train.log`` in its folder. Rows built for the request (``highway ab``) come as
    :class:`Experiment` objects with the ``comparison`` their runs freeze.
    ``trust_unverified``: the runs that resume may read a checkpoint without its manifest
    (only for folders you trust; an error when no run resumes).
    """
    specs = plan_runs(names_or_table, out_root, scale, seeds, data_path, overrides, comparison)
    return run_planned(specs, out_root, jobs, log, progress, launcher, job, trust_unverified)


def run_planned(
    specs: list[RunSpec],
    out_root: str | Path,
    jobs: int = 1,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
    launcher: str = "local",
    job: JobSettings | None = None,
    trust_unverified: bool = False,
) -> list[Path]:
    """:func:`run_experiments` of runs already planned (:func:`plan_runs`)."""
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    if launcher not in LAUNCHERS:
        raise unknown_choice("launcher", launcher, LAUNCHERS)
    if launcher == "local" and job is not None:
        raise ConfigError(
            "--nproc/--max-restarts/--time/--partition apply to submitted jobs; add --launcher "
            "slurm"
        )
    if job is not None and job.max_restarts and not job.nproc:
        raise ConfigError(
            "--max-restarts restarts the processes of --nproc N; add --nproc 1 (or more)"
        )
    log = log or (lambda message: None)
    for spec in specs:  # every run checked before any folder is written
        check_existing(spec)
    check_trust(specs, trust_unverified)
    for spec in specs:
        if spec.finished:
            write_experiment_file(spec)
            log(f"{spec.experiment.name} seed {spec.seed}: finished, skipped")
    todo = launch_order(specs)
    if launcher == "local" and todo:
        warning = busy_cpu_warning(todo, jobs)
        if warning:
            log(warning)
    if launcher != "local":
        if todo:
            folder = Path(out_root) / "jobs"
            run_submitted(todo, launcher, folder, job or JobSettings(), log, trust_unverified)
        _measure_finished(specs, log)
    elif jobs == 1:
        _measure_finished(specs, log)  # rows that finished before this command
        for spec in todo:
            try:
                trained = run_inline(spec, log, progress, trust_unverified)
            except TrainingInterrupted as stop:
                raise stopped_at_checkpoint(stop.signal_number, [spec]) from None
            if trained:
                _measure_finished([spec], log)
    else:
        measure = [Job(s, PROTOCOL) for s in specs if s.finished and needs_protocol(s, log)]
        if measure or todo:
            for line in check_packed([job.spec for job in measure] + todo, jobs):
                log(line)
            start = time.monotonic()
            trains = [Job(s, trust_unverified=trust_unverified) for s in todo]
            trained = run_parallel(measure + trains, jobs, log)  # not those others trained
            _log_aggregate([s.run_dir for s in trained], time.monotonic() - start, jobs, log)
    return [spec.run_dir for spec in specs]


def check_trust(specs: list[RunSpec], trust_unverified: bool) -> None:
    """``--trust-unverified`` applies to the runs that resume: an error where none does."""
    if trust_unverified and not any(spec.interrupted for spec in specs):
        raise ConfigError(
            "--trust-unverified lets a resumed run read a checkpoint without its manifest, "
            "and no run here resumes: drop it"
        )


def busy_cpu_warning(todo: list[RunSpec], jobs: int) -> str:
    """Before ``todo`` trains on this machine's CPU, ``jobs`` at once: a warning when the
    threads they take would share the cores with work already running (else "")."""
    import torch  # only when rows train on this machine

    from ..runtime.device import resolve_device
    from ..runtime.hardware import cpu_contention

    devices = {s.config.train.device for s in todo}
    if devices - {"auto", "cpu"} or ("auto" in devices and resolve_device("auto").type != "cpu"):
        return ""  # an accelerator trains them
    if jobs == 1:
        threads = todo[0].config.train.threads or torch.get_num_threads()
    else:
        threads = threads_per_job(jobs) * min(jobs, len(todo))
    return cpu_contention(threads)


def check_packed(specs: list[RunSpec], jobs: int) -> list[str]:
    """Before ``jobs`` of ``specs`` train at once: on each CUDA device they share, the sum of
    the largest runs' estimated peak memory against its free memory (a one-line error when it
    does not fit, naming the ``--jobs`` that does); the lines that say so. Runs on a CPU (or
    one job at a time) are not checked."""
    if jobs < 2 or not specs:
        return []
    from .packing import check_packing  # torch: only when runs are packed

    return check_packing(((f"{s.experiment.name} seed {s.seed}", s.config) for s in specs), jobs)


def _log_aggregate(
    run_dirs: list[Path], seconds: float, jobs: int, log: Callable[[str], None]
) -> None:
    from .packing import aggregate_line

    line = aggregate_line(run_dirs, seconds, jobs)
    if line:
        log(line)


def _measure_finished(specs: list[RunSpec], log: Callable[[str], None]) -> None:
    """Measure the finished rows that need it in this process (``--jobs 1``, submitted
    rows), each on its own device."""
    for spec in specs:
        if spec.finished and needs_protocol(spec, log):
            measure_protocol(spec.run_dir, spec.experiment, spec.scale, spec.config.train.device)
            log(measured_line(spec))
