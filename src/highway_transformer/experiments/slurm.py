"""Training rows as cluster jobs through submitit: ``highway run --launcher slurm`` (one
Slurm job a row) or ``submitit-local`` (the same jobs on this machine, for trying it)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ExperimentFailed
from ..extras import import_extra
from ..storage import runfolder
from .jobs import names, train_command
from .plan import RunSpec


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


def run_submitted(
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
        command = train_command(spec, job.nproc)
        handle = executor.submit(_run_row_command, command, str(spec.run_dir / runfolder.LOG_FILE))
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
