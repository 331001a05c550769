"""Training rows as cluster jobs through submitit: ``highway run --launcher slurm`` (one
Slurm job a row) or ``submitit-local`` (the same jobs on this machine, for trying it).

A job that the scheduler preempts or whose time limit comes is warned first (submitit asks
Slurm for USR2 90 s before): the job stops its training at a checkpoint and is requeued
(submitit's checkpoint/requeue protocol, :meth:`RowJob.checkpoint`); the requeued job resumes
the row where it stopped. Time limits requeue up to submitit's limit (3 by default),
preemptions always. A row another runner trains is not submitted, and a job whose row is
trained elsewhere or finished when it starts ends at once (:mod:`..training.runlock`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ExperimentFailed
from ..extras import import_extra
from ..storage import runfolder
from ..training.runlock import Handover, claim_for_child, claim_run_folder, holder
from .jobs import clear_unfinished, names, taken_elsewhere, train_command
from .plan import RunSpec

#: How long a warned job waits for its training to write a checkpoint and stop (below the
#: 90 s warning submitit asks Slurm for).
STOP_WAIT_S = 80.0


@dataclass(frozen=True)
class JobSettings:
    """A submitted row's resources: processes (GPUs) per row, time limit, Slurm partition."""

    nproc: int = 0  # 0: one process; N: the row trains with `highway train --nproc N`
    max_restarts: int = 0  # with nproc: `highway train --max-restarts M`
    timeout_min: int = 24 * 60
    partition: str = ""


class RowJob:
    """The submitted job of one row: its ``highway train`` (``--resume`` added whenever the
    row has a checkpoint), appending to the row's ``train.log``; fails with its exit status.
    Submitit pickles it, and calls :meth:`checkpoint` in the job on the scheduler's warning."""

    def __init__(self, command: list[str], log_file: str) -> None:
        self.command = [arg for arg in command if arg != "--resume"]
        self.log_file = log_file
        self.requeues = 0
        self._process: subprocess.Popen | None = None

    def __call__(self) -> None:
        run_dir = Path(self.command[self.command.index("--out") + 1])
        with claim_for_child(run_dir) as handed:  # before the folder is read or cleared
            if handed is None or runfolder.is_finished(run_dir):
                state = f"trained now by {holder(run_dir) or 'another process'}"
                self._note(f"job started for a row {'finished' if handed else state}: skipped")
                return
            self._process = self._start(run_dir, handed)
        while (code := self._process.poll()) is None:
            time.sleep(0.5)  # not wait(): the warning's handler must be able to reap it
        if code:
            raise RuntimeError(f"highway train exited with status {code}; see {self.log_file}")

    def _start(self, run_dir: Path, handed: Handover) -> subprocess.Popen[bytes]:
        """The row's training, handed the folder's claim; with ``--nproc`` its launcher is
        not the process that trains, so the claim ends as the ranks start and take it."""
        command = list(self.command)
        if runfolder.has_checkpoint(run_dir):
            command.append("--resume")
        else:
            clear_unfinished(run_dir)  # an attempt that died before its first checkpoint
        hand_over = "--nproc" not in command
        env, fds = (handed.env, handed.fds) if hand_over else ({}, ())
        with open(self.log_file, "ab") as handle:
            process = subprocess.Popen(
                command, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **env},
                pass_fds=fds,
            )  # fmt: skip
        handed.given = hand_over
        return process

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """The scheduler's warning (preemption or time limit): stop the training at a
        checkpoint (SIGTERM, as to any run), note it in ``train.log``, and hand submitit this
        job to requeue."""
        from submitit.helpers import DelayedSubmission  # only ever called inside a job

        stopped = self._stop_training()
        self.requeues += 1
        self._note(
            f"job warned by the scheduler (preemption or time limit): {stopped}; requeued "
            f"(requeue {self.requeues}) to resume"
        )
        return DelayedSubmission(self, *args, **kwargs)

    def _stop_training(self) -> str:
        process = self._process
        if process is None or process.returncode is not None:
            return "no training was running"
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            try:
                pid, status = os.waitpid(process.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already
                pid, status = process.pid, 0
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                return "training stopped at a checkpoint"
            time.sleep(0.2)
        return f"training still writing after {STOP_WAIT_S:.0f} s (the last checkpoint stands)"

    def _note(self, line: str) -> None:
        with open(self.log_file, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_process": None}  # a process does not travel


def run_submitted(
    specs: list[RunSpec],
    launcher: str,
    folder: Path,
    job: JobSettings,
    log: Callable[[str], None],
    trust_unverified: bool = False,
) -> None:
    """Submit every row as a job (submitit) and wait for all; the same skip/resume rules
    (``trust_unverified``: a resumed checkpoint may lack its manifest)."""
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
        with claim_run_folder(spec.run_dir, log) as mine:  # the command prepares the folder
            if taken_elsewhere(spec, mine, log):
                continue
            command = train_command(spec, job.nproc, job.max_restarts, trust_unverified)
        row = RowJob(command, str(spec.run_dir / runfolder.LOG_FILE))
        handle = executor.submit(row)
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
        failed_names = names(failed)
        raise ExperimentFailed(
            f"{len(failed)} job(s) failed: {failed_names}; see train.log in their run folders and "
            f"the job logs in {folder}"
        )
