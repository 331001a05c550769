"""Run named experiments: one run folder per (row, seed), sequential or in parallel, resumable.

Layout: ``OUT/<table>/<scale>/<row>/seed<N>/`` holding the trainer's run folder
(``config.yaml``, ``metrics.jsonl``, ``checkpoint/``, ``best/``, ``results.json``) and an
``experiment.json`` (name, table, scale, seed, published figures). Re-running skips finished
runs (``results.json`` present) and resumes interrupted ones (``checkpoint/`` present).
Seed ``N`` trains with ``train.seed + N - 1``; every row of a table shares the seed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, build_config, parse_override, save_config
from ..errors import ConfigError, HighwayError, TrainingInterrupted, unknown_choice
from ..extras import import_extra
from ..train import runfolder
from ..train.stopping import StopRequests, interrupted, stop_when_parent_dies
from . import estimate
from .param_match import match_parameters
from .protocols import PROTOCOL_FILE, measure_protocol, protocol_command
from .registry import Experiment, get_experiment, resolve_experiments
from .scale import describe_scale, get_scale, scale_config

EXPERIMENT_FILE = "experiment.json"
LOG_FILE = "train.log"


class ExperimentFailed(HighwayError):
    """One or more training runs of an experiment ended with an error."""


@dataclass(frozen=True)
class RunSpec:
    """One (row, seed) run: its experiment, folder and final configuration."""

    experiment: Experiment
    seed: int
    scale: str
    run_dir: Path
    config: Config
    overrides: tuple[str, ...] = ()  # what the run computes (all but the PLACE_KEYS ones)

    @property
    def finished(self) -> bool:
        return (self.run_dir / runfolder.RESULTS_FILE).is_file()

    @property
    def interrupted(self) -> bool:
        folder = self.run_dir / "checkpoint"
        old = folder.with_name("checkpoint.old")  # a swap cut between its renames
        return not self.finished and (folder.exists() or old.exists())


def run_dir_for(out_root: str | Path, experiment: Experiment, scale: str, seed: int) -> Path:
    """``out_root/<table>/<scale>/<row>/seed<N>``."""
    return Path(out_root) / experiment.table / scale / experiment.row / f"seed{seed}"


def experiment_config(
    experiment: Experiment,
    scale: str,
    seed: int = 1,
    data_path: str | Path | None = None,
    overrides: Iterable[str] = (),
) -> Config:
    """The row's preset scaled to ``scale``, then ``data.path`` and overrides, then the seed."""
    config = scale_config(experiment.config(), scale)
    extra = ([f"data.path={data_path}"] if data_path is not None else []) + list(overrides)
    config = build_config(config, None, extra)
    if experiment.match_params_of:
        matched = get_experiment(experiment.match_params_of)
        config = match_parameters(config, experiment_config(matched, scale, seed, None, overrides))
    config = config.replace(**{"train.seed": config.train.seed + seed - 1})
    config.name = experiment.name.replace("/", "_") + f"_{scale}_seed{seed}"
    return config


def plan_runs(
    names_or_table: str | Iterable[str],
    out_root: str | Path,
    scale: str,
    seeds: int = 1,
    data_path: str | Path | None = None,
    overrides: Iterable[str] = (),
) -> list[RunSpec]:
    """Every (row, seed) run of the request, with its folder and config (nothing is written),
    seed by seed: every row's first seed comes before any row's second, so a table stopped
    part-way (runs of hours on a CPU) has compared every row."""
    get_scale(scale)
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, got {seeds}")
    overrides = list(overrides)
    recorded = tuple(o for o in overrides if parse_override(o)[0] not in PLACE_KEYS)
    specs = []
    experiments = resolve_experiments(names_or_table)
    for seed in range(1, seeds + 1):
        for experiment in experiments:
            config = experiment_config(experiment, scale, seed, data_path, overrides)
            folder = run_dir_for(out_root, experiment, scale, seed)
            specs.append(RunSpec(experiment, seed, scale, folder, config, recorded))
    return specs


def write_experiment_file(spec: RunSpec) -> Path:
    """``experiment.json``: what the run reproduces and the published figures."""
    e = spec.experiment
    info: dict[str, Any] = {
        "name": e.name,
        "table": e.table,
        "also_in": list(e.also_in),
        "row": e.row,
        "preset": e.preset,
        "scale": spec.scale,
        "scale_description": describe_scale(spec.scale),
        "overrides": list(spec.overrides),
        "seed": spec.seed,
        "train_seed": spec.config.train.seed,
        "metric": e.metric,
        "baseline": e.baseline,
        "published": e.published,
        "protocols": e.protocols,
        "match_params_of": e.match_params_of,
        "description": e.description,
    }
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    path = spec.run_dir / EXPERIMENT_FILE
    path.write_text(json.dumps(info, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def _check_same_overrides(spec: RunSpec) -> None:
    """Refuse to skip or resume a run folder trained with other overrides (another budget)."""
    path = spec.run_dir / EXPERIMENT_FILE
    if not path.is_file():
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8")).get("overrides")
    except (OSError, ValueError, AttributeError):
        return  # unreadable: the run is re-prepared from this request
    if stored is not None and list(stored) != list(spec.overrides):
        raise ConfigError(
            f"{spec.run_dir} was trained with overrides {stored or 'none'}, this request gives "
            f"{list(spec.overrides) or 'none'}: pass another --out, or the same overrides"
        )


#: Settings that say where a run trains, not what it computes: a run may be resumed with
#: others (each stretch of training records its machine and threads).
PLACE_KEYS = frozenset(
    {"data.path", "train.device", "train.threads", "train.compile", "train.fused_optimizer",
     "train.pin_memory", "train.dist_backend", "train.dist_timeout", "train.wandb_project",
     "train.tensorboard"}
)  # fmt: skip


def _check_same_config(spec: RunSpec) -> None:
    """Refuse to skip or resume a run folder whose config is not the one this request plans
    (e.g. the scale or a preset changed since it trained): its numbers would be mixed into
    a table of other models."""
    try:
        differing = runfolder.config_differences(
            spec.run_dir, spec.config, PLACE_KEYS | {"name", "source"}
        )
    except HighwayError:
        return  # unreadable: training refuses or re-prepares it
    if differing:
        shown = ", ".join(f"{k}={saved!r} there, {now!r} now" for k, saved, now in differing[:3])
        more = f" and {len(differing) - 3} more" if len(differing) > 3 else ""
        raise ConfigError(
            f"{spec.run_dir} was trained with another configuration ({shown}{more}): pass "
            "another --out, or move that folder away to train it again"
        )


def _check_existing(spec: RunSpec) -> None:
    """A finished or interrupted run folder must hold this request's run."""
    if spec.finished or spec.interrupted:
        _check_same_overrides(spec)
        _check_same_config(spec)


@dataclass(frozen=True)
class RunState:
    """What ``highway run`` would do with a run: ``finished``, ``resume`` or ``start``."""

    kind: str
    words: str  # e.g. "resumes from its checkpoint at step 5,153 of 17,190"
    steps_left: int


def run_state(spec: RunSpec) -> RunState:
    """The run's state, after the same checks ``highway run`` makes before it trains."""
    from ..train.checkpoint import checkpoint_step
    from ..train.runlock import holder

    _check_existing(spec)
    total = spec.config.train.max_steps
    if spec.finished:
        return RunState("finished", "finished", 0)
    busy = holder(spec.run_dir)
    now = f"; training now: {busy}" if busy else ""
    if spec.interrupted:
        step = checkpoint_step(spec.run_dir / "checkpoint")
        words = f"resumes from its checkpoint at step {step:,} of {total:,}{now}"
        return RunState("resume", words, total - step)
    return RunState("start", f"starts, {total:,} steps{now}", total)


def describe_plan(specs: list[RunSpec], jobs: int = 1, launcher: str = "local") -> list[str]:
    """One line per run (folder and state), then the totals and, for a local run, the time
    they take here at the rates the rows' own runs measured (``jobs`` at once): ``highway run
    --plan``."""
    states = [run_state(spec) for spec in specs]
    lines = [
        f"{spec.experiment.name} seed {spec.seed} ({spec.run_dir}): {state.words}"
        for spec, state in zip(specs, states, strict=True)
    ]
    count = {kind: sum(s.kind == kind for s in states) for kind in ("finished", "resume", "start")}
    left = sum(s.steps_left for s in states)
    lines.append(
        f"{count['finished']} finished, {count['resume']} to resume, {count['start']} to start: "
        f"{left:,} steps to train"
    )
    if launcher != "local":
        return [*lines, f"submitted with --launcher {launcher}: no time estimate from here"]
    return [*lines, _estimate(specs, states, jobs)]


def launch_order(specs: list[RunSpec]) -> list[RunSpec]:
    """The runs left to train, in the order the runner starts them: interrupted runs first
    (a table part-way through completes before new rows start), then the rest seed by seed."""
    todo = [spec for spec in specs if not spec.finished]
    return sorted(todo, key=lambda spec: not spec.interrupted)  # stable: plan order kept


def _estimate(specs: list[RunSpec], states: list[RunState], jobs: int) -> str:
    """:func:`estimate.estimate_line` for a local run of ``specs`` with ``jobs`` at once
    (each with :func:`threads_per_job` threads when several train at once, as the runner
    launches them)."""
    import torch

    first = specs[0].config.train
    threads = first.threads or (threads_per_job(jobs) if jobs > 1 else torch.get_num_threads())
    here = estimate.machine_here(first.device, first.precision, threads)
    rows: dict[str, list[Path]] = {}
    for spec in specs:
        rows.setdefault(spec.experiment.name, []).append(spec.run_dir)
    rates = {row: estimate.seconds_per_step(dirs, here) for row, dirs in rows.items()}
    left = {id(spec): state.steps_left for spec, state in zip(specs, states, strict=True)}
    runs = [(spec.experiment.name, left[id(spec)]) for spec in launch_order(specs)]
    return estimate.estimate_line(runs, rates, jobs, threads)


def _prepare(spec: RunSpec) -> bool:
    """Write experiment.json; clear the leftovers of a run that died before its first
    checkpoint. Returns whether the run resumes."""
    write_experiment_file(spec)
    if spec.interrupted:
        return True
    for name in (runfolder.METRICS_FILE, runfolder.METRICS_CSV):
        (spec.run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(spec.run_dir / runfolder.BEST_DIR, ignore_errors=True)
    return False


def _run_inline(spec: RunSpec, log: Callable[[str], None], progress: bool) -> None:
    from ..train.trainer import train

    resume = _prepare(spec)
    log(f"{spec.experiment.name} seed {spec.seed}: {'resuming' if resume else 'training'}")
    train(spec.config, spec.run_dir, resume=resume, progress=progress, log=log)


def _train_command(spec: RunSpec, nproc: int = 0) -> list[str]:
    """``highway train`` of one row (resuming where it stopped; ``nproc``: data parallel)."""
    resume = _prepare(spec)
    config_file = spec.run_dir / runfolder.CONFIG_FILE
    save_config(spec.config, config_file)
    command = [sys.executable, "-m", "highway_transformer.cli", "train", "--config",
               str(config_file), "--out", str(spec.run_dir), "--no-progress"]  # fmt: skip
    if resume:
        command.append("--resume")
    if nproc:
        command += ["--nproc", str(nproc)]
    return command


#: What a job slot of ``highway run --jobs N`` does for a row: train it, or (HT Table 5)
#: measure its finished best weights the paper's way.
TRAIN, PROTOCOL = "train", "protocol"


@dataclass(frozen=True)
class Job:
    spec: RunSpec
    kind: str = TRAIN

    @property
    def name(self) -> str:
        what = "" if self.kind == TRAIN else " (validation the paper's way)"
        return f"{self.spec.experiment.name} seed {self.spec.seed}{what}"

    def command(self) -> list[str]:
        if self.kind == TRAIN:
            return _train_command(self.spec)
        s = self.spec
        return protocol_command(s.run_dir, s.experiment, s.scale, s.config.train.device)


def _launch(job: Job, threads: int) -> subprocess.Popen[bytes]:
    command = job.command()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(job.spec.run_dir / LOG_FILE, "ab") as handle:
        return subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, env=env,
            preexec_fn=stop_when_parent_dies(),
        )  # fmt: skip


Running = list[tuple[Job, subprocess.Popen[bytes]]]


def _names(specs: list[RunSpec]) -> str:
    return ", ".join(f"{s.experiment.name} seed {s.seed}" for s in specs)


def threads_per_job(jobs: int) -> int:
    """CPU threads each of ``jobs`` rows training at once gets (the cores shared out)."""
    return max(1, (os.cpu_count() or 1) // jobs)


def _run_parallel(jobs_todo: list[Job], jobs: int, log: Callable[[str], None]) -> None:
    """Run ``jobs_todo``, ``jobs`` at a time; a row that finishes training and needs its
    validation measured the paper's way gets that as the next job, so no slot waits on it.
    A stop signal is passed on to the running jobs, which checkpoint and stop; nothing new
    starts."""
    threads = threads_per_job(jobs)
    pending, running, forwarded = list(jobs_todo), [], False
    ended: dict[str, list[Job]] = {"failed": [], "stopped": [], "finished": []}
    with StopRequests() as stops:
        while pending or running:
            while pending and len(running) < jobs and not stops.requested:
                job = pending.pop(0)
                log(f"{job.name}: started ({job.spec.run_dir / LOG_FILE})")
                running.append((job, _launch(job, threads)))
            if stops.requested and not forwarded:
                pending, forwarded = [], True  # each running row checkpoints and exits
                for _, process in running:
                    process.send_signal(signal.SIGTERM)
            running = _reap(running, stops.requested, ended, log)
            for job in ended["finished"]:
                if job.kind == PROTOCOL:
                    log(_measured(job.spec))
                elif _needs_protocol(job.spec, log):
                    pending.insert(0, Job(job.spec, PROTOCOL))
            ended["finished"] = []
            time.sleep(0.2)
    if ended["failed"]:
        failed = ", ".join(job.name for job in ended["failed"])
        raise ExperimentFailed(
            f"{len(ended['failed'])} run(s) failed: {failed}; see train.log in their run folders"
        )
    if stops.signal_number is not None:
        stopped = {id(job.spec) for job in ended["stopped"]}
        in_order = list({id(j.spec): j.spec for j in jobs_todo if id(j.spec) in stopped}.values())
        raise _stopped(stops.signal_number, in_order)


def _reap(
    running: Running, stopping: bool, ended: dict[str, list[Job]], log: Callable[[str], None]
) -> Running:
    """The jobs still running; the others filed under ``ended`` (a job ended by a signal while
    stopping is ``stopped``, any other non-zero exit ``failed``, exit 0 ``finished``)."""
    still = []
    for job, process in running:
        code = process.poll()
        if code is None:
            still.append((job, process))
            continue
        log(f"{job.name}: exit status {code}")
        if stopping and (code < 0 or code > 128):
            ended["stopped"].append(job)
        elif code != 0:
            ended["failed"].append(job)
        else:
            ended["finished"].append(job)
    return still


def _stopped(number: int, specs: list[RunSpec]) -> TrainingInterrupted:
    return interrupted(
        number,
        f"{_names(specs) or 'no run'} stopped at a checkpoint",
        "the same `highway run` command resumes them and the rows not started",
    )


#: Where rows train: ``local`` (this machine, --jobs at once), ``slurm`` (one Slurm job a
#: row, through submitit) or ``submitit-local`` (the same jobs on this machine, for trying it).
LAUNCHERS = ("local", "slurm", "submitit-local")


@dataclass(frozen=True)
class JobSettings:
    """A submitted row's resources: processes (GPUs) per row, time limit, Slurm partition."""

    nproc: int = 0  # 0: one process; N: the row trains with `highway train --nproc N`
    timeout_min: int = 24 * 60
    partition: str = ""


def _run_row_command(command: list[str], log_file: str) -> None:
    """The submitted job: run the row's ``highway train`` and fail with its exit status."""
    with open(log_file, "ab") as handle:
        code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT).returncode
    if code:
        raise RuntimeError(f"highway train exited with status {code}; see {log_file}")


def _run_submitted(
    specs: list[RunSpec], launcher: str, folder: Path, job: JobSettings, log: Callable[[str], None]
) -> None:
    """Submit every row as a job (submitit) and wait for all; the same skip/resume rules."""
    submitit = import_extra("submitit", f"--launcher {launcher}")
    cluster = "slurm" if launcher == "slurm" else "local"
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    params: dict[str, Any] = {"timeout_min": job.timeout_min, "tasks_per_node": 1, "nodes": 1}
    if cluster == "slurm":
        params["gpus_per_node"] = job.nproc or 1
        if job.partition:
            params["slurm_partition"] = job.partition
    executor.update_parameters(**params)
    submitted = []
    for spec in specs:
        command = _train_command(spec, job.nproc)
        handle = executor.submit(_run_row_command, command, str(spec.run_dir / LOG_FILE))
        log(f"{spec.experiment.name} seed {spec.seed}: submitted as job {handle.job_id}")
        submitted.append((spec, handle))
    failed = []
    for spec, handle in submitted:
        try:
            handle.result()
        except Exception:  # submitit re-raises the job's failure of any kind
            failed.append(spec)
        log(f"{spec.experiment.name} seed {spec.seed}: job {handle.job_id} {handle.state}")
    if failed:
        names = _names(failed)
        raise ExperimentFailed(
            f"{len(failed)} job(s) failed: {names}; see train.log in their run folders and "
            f"the job logs in {folder}"
        )


def run_experiments(
    names_or_table: str | Iterable[str],
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
) -> list[Path]:
    """Train every (row, seed) of the request; return all their run folders.

    Finished runs are skipped, interrupted ones resumed before any run starts afresh
    (:func:`launch_order`). ``jobs > 1`` trains that many runs
    at once, each as a ``python -m highway_transformer.cli train`` process logging to
    ``train.log`` in its folder.
    """
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    if launcher not in LAUNCHERS:
        raise unknown_choice("launcher", launcher, LAUNCHERS)
    if launcher == "local" and job is not None:
        raise ConfigError(
            "--nproc/--time/--partition apply to submitted jobs; add --launcher slurm"
        )
    log = log or (lambda message: None)
    specs = plan_runs(names_or_table, out_root, scale, seeds, data_path, overrides)
    for spec in specs:
        _check_existing(spec)
        if spec.finished:
            write_experiment_file(spec)
            log(f"{spec.experiment.name} seed {spec.seed}: finished, skipped")
    todo = launch_order(specs)
    if launcher != "local":
        if todo:
            _run_submitted(todo, launcher, Path(out_root) / "jobs", job or JobSettings(), log)
        _measure_finished(specs, log)
    elif jobs == 1:
        _measure_finished(specs, log)  # rows that finished before this command
        for spec in todo:
            try:
                _run_inline(spec, log, progress)
            except TrainingInterrupted as stop:
                raise _stopped(stop.signal_number, [spec]) from None
            _measure_finished([spec], log)
    else:
        measure = [Job(s, PROTOCOL) for s in specs if s.finished and _needs_protocol(s, log)]
        if measure or todo:
            _run_parallel(measure + [Job(s) for s in todo], jobs, log)
    return [spec.run_dir for spec in specs]


def _needs_protocol(spec: RunSpec, log: Callable[[str], None]) -> bool:
    """HT Table 5: whether a finished row's validation is still to be measured the paper's
    way (once, as soon as it finishes: its ``best/`` weights may be dropped after that);
    a row whose weights are gone says so instead."""
    if not spec.experiment.eval_overrides or (spec.run_dir / PROTOCOL_FILE).is_file():
        return False
    if not (spec.run_dir / runfolder.BEST_DIR).is_dir():
        log(f"{spec.experiment.name} seed {spec.seed}: its best/ weights are gone, so its "
            "validation cannot be measured the paper's way; the report's paper-protocol "
            "table leaves it out")  # fmt: skip
        return False
    return True


def _measure_finished(specs: list[RunSpec], log: Callable[[str], None]) -> None:
    """Measure the finished rows that need it in this process (``--jobs 1``, submitted
    rows), each on its own device."""
    for spec in specs:
        if spec.finished and _needs_protocol(spec, log):
            measure_protocol(spec.run_dir, spec.experiment, spec.scale, spec.config.train.device)
            log(_measured(spec))


def _measured(spec: RunSpec) -> str:
    return f"{spec.experiment.name} seed {spec.seed}: validation with the paper's protocol"
