"""Rows as cluster jobs (``experiments/slurm.py``): each row submitted with its ``highway train``
command and the resources asked, the job failing with the row's exit status, resuming
whenever the row has a checkpoint, stopping its training and handing itself back for requeue
on the scheduler's warning; failed rows named in one line; a row another runner trains neither
submitted nor started. submitit is replaced by a
recording stand-in (test_distributed.py preempts a real local job)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import ExperimentFailed
from highway_transformer.experiments import get_experiment, slurm
from highway_transformer.experiments.plan import RunSpec
from highway_transformer.experiments.slurm import JobSettings, RowJob, run_submitted
from highway_transformer.training import runlock


class FakeJob:
    def __init__(self, number: int, function: Callable[..., None], args: tuple) -> None:
        self.job_id, self.function, self.args = str(number), function, args
        self.state = "COMPLETED"

    def result(self) -> None:
        if Path(self.function.log_file).parent.name == "fail":
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
    job = JobSettings(nproc=2, max_restarts=1, timeout_min=60, partition="gpu")
    run_submitted(specs, "slurm", tmp_path / "jobs", job, said.append)
    (made,) = executor.made
    assert made.cluster == "slurm" and made.params == {
        "timeout_min": 60, "tasks_per_node": 1, "nodes": 1, "gpus_per_node": 2,
        "slurm_partition": "gpu",
    }  # fmt: skip
    for spec, submitted in zip(specs, made.jobs, strict=True):
        row = submitted.function
        assert isinstance(row, RowJob) and submitted.args == ()
        assert row.command[-4:] == ["--nproc", "2", "--max-restarts", "1"]
        assert "--out" in row.command
        assert row.log_file == str(spec.run_dir / "train.log")
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


def _row(tmp_path: Path, code: str, *options: str) -> RowJob:
    """A job whose "training" is ``code`` (``sys.argv`` holds the row's options)."""
    command = [sys.executable, "-c", code, "--out", str(tmp_path), *options]
    return RowJob(command, str(tmp_path / "train.log"))


def test_the_submitted_job_fails_with_the_rows_exit_status(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _row(tmp_path, "print('step 1')")()
    with pytest.raises(RuntimeError, match=f"exited with status 3; see {log}"):
        _row(tmp_path, "print('step 2'); raise SystemExit(3)")()
    assert log.read_text().splitlines() == ["step 1", "step 2"]  # appended, both


def test_a_job_resumes_whenever_its_row_has_a_checkpoint(tmp_path: Path) -> None:
    """Asked at each start, not at submission: a requeued job finds the checkpoint its first
    attempt wrote; an attempt that died before one starts over without its records."""
    # submitted resuming: decided again at each start
    row = _row(tmp_path, "import sys; print(sys.argv[-1])", "--resume")
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    row()
    assert not (tmp_path / "metrics.jsonl").exists()
    (tmp_path / "checkpoint").mkdir()
    row()
    assert (tmp_path / "train.log").read_text().splitlines() == [str(tmp_path), "--resume"]


@pytest.mark.skipif(runlock.fcntl is None, reason="the kernel's flock: POSIX")
def test_a_row_another_runner_trains_is_neither_submitted_nor_started(
    tmp_path: Path,
    executor: type[FakeExecutor],
    hold_folder: Callable[[Path], subprocess.Popen[str]],
) -> None:
    busy, free = _spec(tmp_path, "busy"), _spec(tmp_path, "free")
    owner = hold_folder(busy.run_dir)
    (busy.run_dir / "metrics.jsonl").write_text("its first steps\n")
    said: list[str] = []
    run_submitted([busy, free], "slurm", tmp_path / "jobs", JobSettings(), said.append)
    assert [job.function.log_file for job in executor.made[0].jobs] == [
        str(free.run_dir / "train.log")
    ]
    assert said[0].startswith(f"ht-table1/t-l3 seed 1: trained now by PID {owner.pid} on ")
    assert (busy.run_dir / "metrics.jsonl").read_text() == "its first steps\n"
    row = _row(busy.run_dir, "raise SystemExit(3)")  # a job of an earlier submission
    row()  # ends at once, without running its command
    assert (busy.run_dir / "metrics.jsonl").read_text() == "its first steps\n"
    note = (busy.run_dir / "train.log").read_text()
    assert note.startswith(f"job started for a row trained now by PID {owner.pid} on ")
    assert note.endswith(": skipped\n")


def test_a_job_of_a_finished_row_ends_and_a_training_gets_the_claim(tmp_path: Path) -> None:
    show = "import os; print(os.environ.get('HIGHWAY_RUN_LOCK_FD') is not None)"
    _row(tmp_path, show)()
    _row(tmp_path, show, "--nproc", "2")()  # its ranks, not their launcher, take the lock
    (tmp_path / "results.json").write_text("{}\n")
    _row(tmp_path, "raise SystemExit(3)")()
    lines = (tmp_path / "train.log").read_text().splitlines()
    assert lines == ["True", "False", "job started for a row finished: skipped"]


def test_the_schedulers_warning_stops_the_training_and_requeues_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """submitit calls ``checkpoint`` in the job on the warning signal: the training gets
    SIGTERM (it checkpoints and stops), train.log one line, submitit the job to requeue,
    which pickles without its process."""
    import pickle
    import subprocess
    import time

    submitit = pytest.importorskip("submitit")
    row = _row(tmp_path, "")
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); "
    row._process = subprocess.Popen([sys.executable, "-c", code + "time.sleep(60)"])
    time.sleep(1.0)  # its handler in place
    again = row.checkpoint()
    assert isinstance(again, submitit.helpers.DelayedSubmission) and again.function is row
    assert row.requeues == 1
    assert (tmp_path / "train.log").read_text() == (
        "job warned by the scheduler (preemption or time limit): training stopped at a "
        "checkpoint; requeued (requeue 1) to resume\n"
    )
    copy = pickle.loads(pickle.dumps(row))
    assert copy._process is None and copy.requeues == 1 and copy.command == row.command
    assert row.checkpoint().function is row and row.requeues == 2  # nothing left to stop
    assert "no training was running; requeued (requeue 2)" in (tmp_path / "train.log").read_text()
