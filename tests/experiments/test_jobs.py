"""Rows as processes on this machine (``experiments/jobs.py``): a row's folder prepared and its
``highway train`` command, N jobs at a time, a finished HT Table 5 row measured next, failed
rows named in one line, a row another runner has skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from highway_transformer.config import Config
from highway_transformer.errors import ExperimentFailed
from highway_transformer.experiments import get_experiment, jobs
from highway_transformer.experiments.jobs import (
    PROTOCOL,
    TRAIN,
    Job,
    prepare,
    run_inline,
    run_parallel,
    stopped_at_checkpoint,
    train_command,
)
from highway_transformer.experiments.plan import RunSpec
from highway_transformer.storage import runfolder


def _spec(tmp_path: Path, row: str = "ht-table1/t-l3", seed: int = 1) -> RunSpec:
    folder = tmp_path / row.replace("/", "_") / f"seed{seed}"
    folder.mkdir(parents=True)
    config = Config().replace(**{"train.seed": 1110 + seed, "train.device": "cpu"})
    return RunSpec(get_experiment(row), seed, "tiny", folder, config)


def test_prepare_clears_a_run_that_died_before_its_first_checkpoint(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    (spec.run_dir / runfolder.METRICS_FILE).write_text("{}\n")
    (spec.run_dir / runfolder.BEST_DIR).mkdir()
    assert prepare(spec) is False  # a fresh start
    assert sorted(p.name for p in spec.run_dir.iterdir()) == [runfolder.EXPERIMENT_FILE]
    info = json.loads((spec.run_dir / runfolder.EXPERIMENT_FILE).read_text())
    assert (info["name"], info["seed"], info["scale"]) == ("ht-table1/t-l3", 1, "tiny")
    (spec.run_dir / runfolder.CHECKPOINT_DIR).mkdir()
    (spec.run_dir / runfolder.METRICS_FILE).write_text("{}\n")
    assert prepare(spec) is True  # interrupted: resumes, its metrics kept
    assert (spec.run_dir / runfolder.METRICS_FILE).exists()


def test_a_row_another_runner_finished_meanwhile_is_skipped(tmp_path: Path) -> None:
    spec = _spec(tmp_path)  # planned unfinished; another runner's results arrive after
    (spec.run_dir / runfolder.RESULTS_FILE).write_text("{}\n")
    said: list[str] = []
    assert run_inline(spec, said.append, progress=False) is False
    assert said == ["ht-table1/t-l3 seed 1: finished by another process meanwhile, skipped"]
    assert sorted(p.name for p in spec.run_dir.iterdir()) == [runfolder.RESULTS_FILE]
    assert jobs._launch(Job(spec), 1, said.append) is None
    assert said[-1] == said[0]
    assert sorted(p.name for p in spec.run_dir.iterdir()) == [runfolder.RESULTS_FILE]  # released


def test_the_train_command_saves_the_config_and_resumes(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    config_file = spec.run_dir / runfolder.CONFIG_FILE
    head = [sys.executable, "-m", "highway_transformer.cli", "train", "--config",
            str(config_file), "--out", str(spec.run_dir), "--no-progress"]  # fmt: skip
    assert train_command(spec) == head
    assert yaml.safe_load(config_file.read_text())["train"]["seed"] == 1111
    (spec.run_dir / runfolder.CHECKPOINT_DIR).mkdir()
    assert train_command(spec, nproc=2) == [*head, "--resume", "--nproc", "2"]
    trusted = [*head, "--resume", "--trust-unverified"]
    assert train_command(spec, trust_unverified=True) == trusted
    assert Job(spec, trust_unverified=True).command() == trusted


def test_trust_is_passed_only_to_a_run_that_resumes(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert "--trust-unverified" not in train_command(spec, trust_unverified=True)


def test_a_protocol_job_measures_the_rows_best_weights(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "ht-table5/l6-xl")
    assert Job(spec).name == "ht-table5/l6-xl seed 1"
    measure = Job(spec, PROTOCOL)
    assert measure.name == "ht-table5/l6-xl seed 1 (validation the paper's way)"
    assert measure.command()[-4:] == [str(spec.run_dir), "ht-table5/l6-xl", "tiny", "cpu"]


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Jobs become processes that exit with the status ``EXIT`` names for their row and kind;
    returns the (row, kind) of each job started, in order."""
    started: list[tuple[str, str]] = []

    def launch(job: Job, threads: int, log: object) -> subprocess.Popen[bytes]:
        started.append((job.spec.experiment.name, job.kind))
        if job.kind == PROTOCOL:  # what the measuring process writes
            (job.spec.run_dir / runfolder.PROTOCOL_FILE).write_text("{}\n")
        code = EXIT.get((job.spec.experiment.name, job.kind), 0)
        return subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])

    monkeypatch.setattr(jobs, "_launch", launch)
    return started


EXIT = {("ht-table1/t-l3+tanh", TRAIN): 3}


def test_rows_run_n_at_a_time_and_a_finished_table5_row_is_measured(
    tmp_path: Path, exits: list[tuple[str, str]]
) -> None:
    plain, table5 = _spec(tmp_path), _spec(tmp_path, "ht-table5/l6-xl")
    (table5.run_dir / runfolder.BEST_DIR).mkdir()  # finished with best weights to measure
    said: list[str] = []
    trained = run_parallel([Job(plain), Job(table5)], 2, said.append)
    assert sorted(spec.experiment.name for spec in trained) == ["ht-table1/t-l3", "ht-table5/l6-xl"]
    assert exits == [("ht-table1/t-l3", TRAIN), ("ht-table5/l6-xl", TRAIN),
                     ("ht-table5/l6-xl", PROTOCOL)]  # fmt: skip
    assert "ht-table5/l6-xl seed 1: validation with the paper's protocol" in said
    assert sum(line.endswith("exit status 0") for line in said) == 3


def test_failed_rows_are_named_after_the_others_finish(
    tmp_path: Path, exits: list[tuple[str, str]]
) -> None:
    rows = [_spec(tmp_path, "ht-table1/t-l3+tanh"), _spec(tmp_path, "ht-table1/t-l3")]
    with pytest.raises(ExperimentFailed) as info:
        run_parallel([Job(spec) for spec in rows], 1, lambda line: None)
    assert str(info.value) == (
        "1 run(s) failed: ht-table1/t-l3+tanh seed 1; see train.log in their run folders"
    )
    assert [row for row, _ in exits] == ["ht-table1/t-l3+tanh", "ht-table1/t-l3"]


def test_a_stop_names_the_rows_that_checkpointed(tmp_path: Path) -> None:
    error = stopped_at_checkpoint(15, [_spec(tmp_path), _spec(tmp_path, seed=2)])
    assert error.exit_status == 143
    assert str(error) == (
        "stopped by SIGTERM: ht-table1/t-l3 seed 1, ht-table1/t-l3 seed 2 stopped at a "
        "checkpoint; the same `highway run` (or `highway ab`) command resumes them and the rows "
        "not started"
    )
