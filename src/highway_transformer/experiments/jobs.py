"""Training rows as processes on this machine: ``highway run --jobs N`` keeps N going.

Each row trains as ``python -m highway_transformer.cli train`` logging to ``train.log`` in its
folder, resuming where it stopped; a row that finishes and needs its validation measured the
paper's way (HT Table 5) gets that as its next job. A stop signal is passed on to the running
rows, which checkpoint and exit. A row is claimed (:mod:`..training.runlock`) before its folder
is read or cleared, so several runners drain one table: each skips the rows another trains.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import save_config
from ..errors import ExperimentFailed, TrainingInterrupted
from ..storage import runfolder
from ..training.runlock import claim_for_child, claim_run_folder, holder
from ..training.stopping import StopRequests, interrupted, stop_when_parent_dies
from .plan import RunSpec, threads_per_job, write_experiment_file
from .protocols import measured_line, needs_protocol, protocol_command


def prepare(spec: RunSpec) -> bool:
    """Write experiment.json; clear the leftovers of a run that died before its first
    checkpoint. Returns whether the run resumes."""
    write_experiment_file(spec)
    if spec.interrupted:
        return True
    clear_unfinished(spec.run_dir)
    return False


def clear_unfinished(run_dir: Path) -> None:
    """Delete the records of a run that died before its first checkpoint (it starts over)."""
    for name in (runfolder.METRICS_FILE, runfolder.METRICS_CSV):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / runfolder.BEST_DIR, ignore_errors=True)


def run_inline(
    spec: RunSpec, log: Callable[[str], None], progress: bool, trust_unverified: bool = False
) -> bool:
    """Train ``spec`` in this process (``trust_unverified``: a resumed checkpoint may lack
    its manifest, ``highway run --trust-unverified``); whether it trained: not when another
    process trains it now or finished it meanwhile."""
    from ..training.trainer import train  # torch: only when a row trains in this process

    with claim_run_folder(spec.run_dir, log) as mine:
        if taken_elsewhere(spec, mine, log):
            return False
        resume = prepare(spec)
        log(f"{spec.experiment.name} seed {spec.seed}: {'resuming' if resume else 'training'}")
        train(
            spec.config,
            spec.run_dir,
            resume=resume,
            progress=progress,
            log=log,
            trust_unverified=trust_unverified,
        )
    return True


def taken_elsewhere(spec: RunSpec, claimed: bool, log: Callable[[str], None]) -> bool:
    """Whether another runner has ``spec``: it holds the folder (``claimed`` False) or
    finished the run since this runner planned it; said in ``log``."""
    name = f"{spec.experiment.name} seed {spec.seed}"
    if not claimed:
        who = holder(spec.run_dir) or "another process"
        log(f"{name}: trained now by {who}, skipped")
        return True
    if spec.finished:
        log(f"{name}: finished by another process meanwhile, skipped")
        return True
    return False


def train_command(
    spec: RunSpec, nproc: int = 0, max_restarts: int = 0, trust_unverified: bool = False
) -> list[str]:
    """``highway train`` of one row (resuming where it stopped, from a checkpoint without a
    manifest too if ``trust_unverified``; ``nproc``: data parallel, its processes started
    again up to ``max_restarts`` times when one fails)."""
    resume = prepare(spec)
    config_file = spec.run_dir / runfolder.CONFIG_FILE
    save_config(spec.config, config_file)
    command = [sys.executable, "-m", "highway_transformer.cli", "train", "--config",
               str(config_file), "--out", str(spec.run_dir), "--no-progress"]  # fmt: skip
    if resume:
        command += ["--resume"] + ["--trust-unverified"] * trust_unverified
    if nproc:
        command += ["--nproc", str(nproc)]
    if max_restarts:
        command += ["--max-restarts", str(max_restarts)]
    return command


#: What a job slot of ``highway run --jobs N`` does for a row: train it, or (HT Table 5)
#: measure its finished best weights the paper's way.
TRAIN, PROTOCOL = "train", "protocol"


@dataclass(frozen=True)
class Job:
    spec: RunSpec
    kind: str = TRAIN
    trust_unverified: bool = False  # its resumed checkpoint may lack a manifest

    @property
    def name(self) -> str:
        what = "" if self.kind == TRAIN else " (validation the paper's way)"
        return f"{self.spec.experiment.name} seed {self.spec.seed}{what}"

    def command(self) -> list[str]:
        if self.kind == TRAIN:
            return train_command(self.spec, trust_unverified=self.trust_unverified)
        s = self.spec
        return protocol_command(s.run_dir, s.experiment, s.scale, s.config.train.device)


def _launch(job: Job, threads: int, log: Callable[[str], None]) -> subprocess.Popen[bytes] | None:
    """Start ``job``'s process; None when another runner has its row (a training row is
    claimed first and the claim handed to the process, which keeps the folder's lock)."""
    if job.kind != TRAIN:
        return _popen(job, job.command(), threads, {}, ())
    with claim_for_child(job.spec.run_dir, log) as handed:
        if taken_elsewhere(job.spec, handed is not None, log):
            return None
        assert handed is not None
        process = _popen(job, job.command(), threads, handed.env, handed.fds)
        handed.given = True
        return process


def _popen(
    job: Job, command: list[str], threads: int, env: dict[str, str], fds: tuple[int, ...]
) -> subprocess.Popen[bytes]:
    env = {**os.environ, **env, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(job.spec.run_dir / runfolder.LOG_FILE, "ab") as handle:
        return subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, env=env, pass_fds=fds,
            preexec_fn=stop_when_parent_dies(),
        )  # fmt: skip


Running = list[tuple[Job, subprocess.Popen[bytes]]]


def names(specs: list[RunSpec]) -> str:
    return ", ".join(f"{s.experiment.name} seed {s.seed}" for s in specs)


def run_parallel(jobs_todo: list[Job], jobs: int, log: Callable[[str], None]) -> list[RunSpec]:
    """Run ``jobs_todo``, ``jobs`` at a time; the rows this call trained to the end. A row
    that finishes training and needs its validation measured the paper's way gets that as
    the next job, so no slot waits on it. A stop signal is passed on to the running jobs,
    which checkpoint and stop; nothing new starts."""
    threads = threads_per_job(jobs)
    pending, running, forwarded = list(jobs_todo), [], False
    trained: list[RunSpec] = []
    ended: dict[str, list[Job]] = {"failed": [], "stopped": [], "finished": []}
    with StopRequests() as stops:
        while pending or running:
            while pending and len(running) < jobs and not stops.requested:
                job = pending.pop(0)
                process = _launch(job, threads, log)
                if process is not None:
                    log(f"{job.name}: started ({job.spec.run_dir / runfolder.LOG_FILE})")
                    running.append((job, process))
            if stops.requested and not forwarded:
                pending, forwarded = [], True  # each running row checkpoints and exits
                for _, process in running:
                    process.send_signal(signal.SIGTERM)
            running = _reap(running, stops.requested, ended, log)
            for job in ended["finished"]:
                if job.kind == PROTOCOL:
                    log(measured_line(job.spec))
                    continue
                trained.append(job.spec)
                if needs_protocol(job.spec, log):
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
        raise stopped_at_checkpoint(stops.signal_number, in_order)
    return trained


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


def stopped_at_checkpoint(number: int, specs: list[RunSpec]) -> TrainingInterrupted:
    return interrupted(
        number,
        f"{names(specs) or 'no run'} stopped at a checkpoint",
        "the same `highway run` (or `highway ab`) command resumes them and the rows not started",
    )
