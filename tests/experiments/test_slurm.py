"""Rows as cluster jobs (``experiments/slurm.py``): each row submitted with its ``highway train``
command and the resources asked, the job failing with the row's exit status, and failed
rows named in one line. submitit is replaced by a recording stand-in."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import ExperimentFailed
from highway_transformer.experiments import get_experiment, slurm
from highway_transformer.experiments.plan import RunSpec
from highway_transformer.experiments.slurm import JobSettings, _run_row_command, run_submitted


class FakeJob:
    def __init__(self, number: int, function: Callable[..., None], args: tuple) -> None:
        self.job_id, self.function, self.args = str(number), function, args
        self.state = "COMPLETED"

    def result(self) -> None:
        if Path(self.args[1]).parent.name == "fail":
            self.state = "FAILED"
            raise RuntimeError("the row failed")


class FakeExecutor:
    made: list[FakeExecutor] = []

    def __init__(self, folder: Path, cluster: str) -> None:
        self.folder, self.cluster, self.params, self.jobs = folder, cluster, {}, []
        FakeExecutor.made.append(self)

    def update_parameters(self, **params: Any) -> None:
        self.params.update(params)

    def submit(self, function: Callable[..., None], *args: Any) -> FakeJob:
        self.jobs.append(FakeJob(len(self.jobs) + 1, function, args))
        return self.jobs[-1]


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> type[FakeExecutor]:
    FakeExecutor.made = []
    fake = type("submitit", (), {"AutoExecutor": FakeExecutor})
    monkeypatch.setattr(slurm, "import_extra", lambda module, what: fake)
    return FakeExecutor


def _spec(tmp_path: Path, name: str) -> RunSpec:
    folder = tmp_path / name
    folder.mkdir()
    return RunSpec(get_experiment("ht-table1/t-l3"), 1, "tiny", folder, Config())


def test_each_row_is_a_job_with_the_resources_asked(
    tmp_path: Path, executor: type[FakeExecutor]
) -> None:
    specs = [_spec(tmp_path, "a"), _spec(tmp_path, "b")]
    said: list[str] = []
    job = JobSettings(nproc=2, timeout_min=60, partition="gpu")
    run_submitted(specs, "slurm", tmp_path / "jobs", job, said.append)
    (made,) = executor.made
    assert made.cluster == "slurm" and made.params == {
        "timeout_min": 60, "tasks_per_node": 1, "nodes": 1, "gpus_per_node": 2,
        "slurm_partition": "gpu",
    }  # fmt: skip
    for spec, submitted in zip(specs, made.jobs, strict=True):
        command, log_file = submitted.args
        assert submitted.function is _run_row_command
        assert command[-2:] == ["--nproc", "2"] and "--out" in command
        assert log_file == str(spec.run_dir / "train.log")
    assert said[0] == "ht-table1/t-l3 seed 1: submitted as job 1"
    assert said[-1] == "ht-table1/t-l3 seed 1: job 2 COMPLETED"
    run_submitted(specs, "submitit-local", tmp_path / "jobs", JobSettings(), said.append)
    assert executor.made[1].cluster == "local" and "gpus_per_node" not in executor.made[1].params


def test_failed_jobs_are_named_in_one_line(tmp_path: Path, executor: type[FakeExecutor]) -> None:
    specs = [_spec(tmp_path, "ok"), _spec(tmp_path, "fail")]
    with pytest.raises(ExperimentFailed) as info:
        run_submitted(specs, "slurm", tmp_path / "jobs", JobSettings(), lambda line: None)
    assert str(info.value) == (
        "1 job(s) failed: ht-table1/t-l3 seed 1; see train.log in their run folders and the "
        f"job logs in {tmp_path / 'jobs'}"
    )


def test_the_submitted_job_fails_with_the_rows_exit_status(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _run_row_command([sys.executable, "-c", "print('step 1')"], str(log))
    with pytest.raises(RuntimeError, match=f"exited with status 3; see {log}"):
        _run_row_command([sys.executable, "-c", "print('step 2'); raise SystemExit(3)"], str(log))
    assert log.read_text().splitlines() == ["step 1", "step 2"]  # appended, both
