"""The experiment runner (``experiments/runner.py``): it trains, skips finished runs, resumes
interrupted ones, refuses a folder trained with another config, and runs rows as parallel
jobs."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.experiments import (
    get_experiment,
    plan_runs,
    run_experiments,
)
from highway_transformer.experiments.runner import launch_order
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.training import runlock
from highway_transformer.training.runlock import own_run_folder


def file_overrides(path: Path, level: str = "char") -> list[str]:
    return ["data.corpus=file", f"data.path={path}", f"data.level={level}"]


class Interrupt(Exception):
    pass


def test_runner_refuses_a_folder_trained_with_another_config(
    tmp_path: Path, word_corpus: Path
) -> None:
    """A finished folder whose config is not the planned one (the scale or a preset changed
    since) is never skipped into the table; where it trained (path, threads) may differ."""
    import yaml

    row = "ht-table1/t-l3"
    overrides = [*file_overrides(word_corpus), "train.max_steps=4", "train.eval_interval=2"]
    (run,) = run_experiments(row, tmp_path, "tiny", overrides=overrides)
    saved = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    saved["train"]["threads"], saved["data"]["path"] = 7, "/elsewhere"
    (run / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    messages: list[str] = []
    run_experiments(row, tmp_path, "tiny", overrides=overrides, log=messages.append)
    assert messages == [f"{row} seed 1: finished, skipped"]
    saved["model"]["d_model"] += 4
    (run / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"another configuration \(model.d_model=.* there"):
        run_experiments(row, tmp_path, "tiny", overrides=overrides)


def test_a_setting_added_after_a_run_reads_as_its_default(tmp_path: Path) -> None:
    """A run folder written before a setting existed computed what the setting's default
    computes: it matches a plan at the default, and differs from one that sets it."""
    import yaml

    from highway_transformer.config import Config, save_config
    from highway_transformer.storage.runfolder import CONFIG_FILE, config_differences

    planned = Config()
    save_config(planned, tmp_path / CONFIG_FILE)
    saved = yaml.safe_load((tmp_path / CONFIG_FILE).read_text(encoding="utf-8"))
    del saved["train"]["lr_step"]  # as a folder trained before the step schedule
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved), encoding="utf-8")
    assert config_differences(tmp_path, planned) == []
    planned.train.lr_step = 5
    assert config_differences(tmp_path, planned) == [("train.lr_step", 0, 5)]


def test_runner_trains_skips_and_resumes(
    tmp_path: Path, word_corpus: Path, plan_lines: Callable[[list[str], Path, list[str]], list[str]]
) -> None:
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    overrides = [*file_overrides(word_corpus), "train.max_steps=8", "train.eval_interval=4"]
    messages: list[str] = []
    plan = plan_lines(rows, tmp_path, overrides)
    assert plan[-2] == "0 finished, 0 to resume, 2 to start: 16 steps to train"
    assert "no time estimate (--probe N" in plan[-1]  # nothing has trained here yet
    slurm = plan_lines([*rows, "--launcher", "slurm"], tmp_path, overrides)
    assert slurm[-1] == "submitted with --launcher slurm: no time estimate from here"
    assert not tmp_path.joinpath("ht-table1").exists()  # a plan writes nothing
    dirs = run_experiments(rows, tmp_path, "tiny", overrides=overrides, log=messages.append)
    assert [d.name for d in dirs] == ["seed1", "seed1"]
    for d, row in zip(dirs, rows, strict=True):
        info = json.loads((d / "experiment.json").read_text(encoding="utf-8"))
        assert (info["name"], info["table"]) == (row, "ht-table1")
        assert (info["scale"], info["seed"], info["metric"]) == ("tiny", 1, "bpc")
        assert info["published"] == get_experiment(row).published
        assert json.loads((d / "results.json").read_text())["steps"] == 8
    stamps = [(d / "results.json").stat().st_mtime_ns for d in dirs]

    messages.clear()
    where = ["train.threads=1", "train.device=cpu"]  # where a run trains is not what it computes
    run_experiments(rows, tmp_path, "tiny", overrides=[*overrides, *where], log=messages.append)
    assert messages == [f"{row} seed 1: finished, skipped" for row in rows]
    assert [(d / "results.json").stat().st_mtime_ns for d in dirs] == stamps
    info = json.loads((dirs[0] / "experiment.json").read_text(encoding="utf-8"))
    assert info["overrides"] == [o for o in overrides if not o.startswith("data.path=")]
    with pytest.raises(ConfigError, match="was trained with overrides .* pass another --out"):
        run_experiments(rows, tmp_path, "tiny", overrides=[*overrides, "train.max_steps=9"])
    assert [(d / "results.json").stat().st_mtime_ns for d in dirs] == stamps

    def crash_at_step_8(message: str) -> None:
        if message.startswith("step 8:"):
            raise Interrupt

    tanh = "ht-table1/t-l3+tanh"
    with pytest.raises(Interrupt):
        run_experiments(tanh, tmp_path, "tiny", overrides=overrides, log=crash_at_step_8)
    run_dir = tmp_path / "ht-table1" / "tiny" / "t-l3+tanh" / "seed1"
    assert (run_dir / "checkpoint").is_dir() and not (run_dir / "results.json").exists()
    lines = plan_lines([*rows, tanh], tmp_path, overrides)
    assert lines[0] == f"ht-table1/t-l3 seed 1 ({dirs[0]}): finished"
    assert lines[2] == f"{tanh} seed 1 ({run_dir}): resumes from its checkpoint at step 4 of 8"
    assert lines[3] == "2 finished, 1 to resume, 0 to start: 4 steps to train"
    fresh = "ht-table1/t-l3+param-matched"
    specs = plan_runs([fresh, *rows, tanh], tmp_path, "tiny", overrides=overrides)
    # the interrupted run resumes before a run listed ahead of it starts afresh
    assert [s.experiment.name for s in launch_order(specs)] == [tanh, fresh]
    # the tanh run's first 4 steps trained here: its rate prices the 4 left
    assert lines[4].startswith("at the rates measured on this kind of machine (")
    assert "of training" in lines[4] and "not counted" not in lines[4]
    with own_run_folder(run_dir, resume=True):
        assert f"training now: PID {os.getpid()} on " in plan_lines([tanh], tmp_path, overrides)[0]
    with pytest.raises(ConfigError, match="was trained with overrides"):  # the run's own checks
        plan_lines([tanh], tmp_path, [*overrides, "train.max_steps=9"])
    messages.clear()
    run_experiments(tanh, tmp_path, "tiny", overrides=overrides, log=messages.append)
    assert any("resumed from" in m and "step 4" in m for m in messages)
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 8
    valid_steps = [r["step"] for r in read_metrics(run_dir) if r["split"] == "valid"]
    assert valid_steps == [4, 8]


@pytest.fixture
def plan_lines(
    experiments_cli: Callable[[list[str]], argparse.Namespace],
) -> Callable[[list[str], Path, list[str]], list[str]]:
    """``plan_lines(rows, out, overrides)``: ``highway run ROWS --scale tiny --plan``'s output
    lines, through the CLI."""

    def lines(rows: list[str], out: Path, overrides: list[str]) -> list[str]:
        argv = ["run", *rows, "--scale", "tiny", "--out", str(out), "--plan", *overrides]
        args = experiments_cli(argv)
        with contextlib.redirect_stdout(io.StringIO()) as out_text:
            assert args.func(args) == 0
        return out_text.getvalue().splitlines()

    return lines


def test_parallel_jobs_as_processes(tmp_path: Path, word_corpus: Path) -> None:
    rows = ["ht-table3/t-l3", "ht-table3/t-l3+sigmoid"]
    overrides = [*file_overrides(word_corpus, "word"), "train.max_steps=4", "train.eval_interval=2"]
    dirs = run_experiments(rows, tmp_path, "tiny", jobs=2, overrides=overrides)
    for d in dirs:
        results = json.loads((d / "results.json").read_text(encoding="utf-8"))
        assert results["steps"] == 4 and results["valid"]["ppl"] > 1
        assert (d / "train.log").is_file()


@pytest.mark.skipif(runlock.fcntl is None, reason="the kernel's flock: POSIX")
@pytest.mark.parametrize("jobs", [1, 2])
def test_runners_of_one_table_skip_the_runs_another_trains(
    tmp_path: Path,
    word_corpus: Path,
    jobs: int,
    hold_folder: Callable[[Path], subprocess.Popen[str]],
) -> None:
    """A second `highway run` of a table (here, or on a machine sharing the folders) trains
    the runs no one trains and leaves the others' folders as they are."""
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    overrides = [*file_overrides(word_corpus), "train.max_steps=2", "train.eval_interval=2"]
    busy = tmp_path / "ht-table1" / "tiny" / "t-l3" / "seed1"
    other = hold_folder(busy)  # another runner trains plain, not yet at its first checkpoint
    (busy / "metrics.jsonl").write_text("its first steps\n")
    messages: list[str] = []
    dirs = run_experiments(rows, tmp_path, "tiny", jobs=jobs, overrides=overrides,
                           log=messages.append)  # fmt: skip
    skipped = [m for m in messages if m.startswith("ht-table1/t-l3 seed 1: trained now by ")]
    assert len(skipped) == 1 and f"PID {other.pid} on " in skipped[0], messages
    assert (busy / "metrics.jsonl").read_text() == "its first steps\n"  # not cleared
    assert sorted(p.name for p in busy.iterdir()) == ["metrics.jsonl", "run.lock"]
    assert json.loads((dirs[1] / "results.json").read_text())["steps"] == 2
    assert not (dirs[1] / "run.lock").exists()  # its trainer released it
    if jobs > 1:  # the throughput counts the runs this runner trained
        assert any(m.startswith("1 run(s) trained, 2 at a time: ") for m in messages), messages


def test_a_busy_cpu_is_said_before_rows_train_on_it(
    tmp_path: Path, word_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from highway_transformer.experiments import runner
    from highway_transformer.runtime import hardware

    loads: list[int] = []

    def contention(threads: int) -> str:
        loads.append(threads)
        return f"busy for {threads}"

    monkeypatch.setattr(hardware, "cpu_contention", contention)
    overrides = [*file_overrides(word_corpus), "train.device=cpu"]
    specs = plan_runs(["ht-table1/t-l3", "ht-table1/t-l3+tanh"], tmp_path, "tiny",
                      overrides=overrides)  # fmt: skip
    assert runner.busy_cpu_warning(specs, jobs=1) == f"busy for {loads[-1]}"
    monkeypatch.setattr(runner, "threads_per_job", lambda jobs: 3)
    assert runner.busy_cpu_warning(specs, jobs=2) == "busy for 6"  # 2 runs at once x 3
    assert runner.busy_cpu_warning(specs[:1], jobs=4) == "busy for 3"  # only 1 run to train
    threaded = plan_runs("ht-table1/t-l3", tmp_path / "t", "tiny",
                         overrides=[*overrides, "train.threads=5"])  # fmt: skip
    assert runner.busy_cpu_warning(threaded, jobs=1) == "busy for 5"
    messages: list[str] = []
    run_experiments("ht-table1/t-l3", tmp_path, "tiny", log=messages.append,
                    overrides=[*overrides, "train.max_steps=2"])  # fmt: skip
    assert messages[0].startswith("busy for ")  # said before the run trains
    on_gpu = [*file_overrides(word_corpus), "train.device=cuda"]
    elsewhere = plan_runs("ht-table1/t-l3", tmp_path / "g", "tiny", overrides=on_gpu)
    assert runner.busy_cpu_warning(elsewhere, jobs=1) == ""  # an accelerator trains it


def test_a_checkpoint_without_its_manifest_resumes_only_when_trusted(
    tmp_path: Path, word_corpus: Path
) -> None:
    """``highway run --trust-unverified``: refused unless a run resumes; with it, a resumed
    run (and its plan) reads a checkpoint that lost its manifest; without it, the one-line
    error names the flag."""
    from highway_transformer.errors import CheckpointError

    row = "ht-table1/t-l3"
    overrides = [*file_overrides(word_corpus), "train.max_steps=8", "train.eval_interval=4"]
    with pytest.raises(ConfigError, match="no run here resumes: drop it"):
        run_experiments(row, tmp_path, "tiny", overrides=overrides, trust_unverified=True)
    assert not tmp_path.joinpath("ht-table1").exists()

    def crash_at_step_8(message: str) -> None:
        if message.startswith("step 8:"):
            raise Interrupt

    with pytest.raises(Interrupt):
        run_experiments(row, tmp_path, "tiny", overrides=overrides, log=crash_at_step_8)
    run_dir = tmp_path / "ht-table1" / "tiny" / "t-l3" / "seed1"
    (run_dir / "checkpoint" / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match=r"--trust-unverified \(.*run, ab"):
        run_experiments(row, tmp_path, "tiny", overrides=overrides)
    messages: list[str] = []
    run_experiments(
        row, tmp_path, "tiny", overrides=overrides, log=messages.append, trust_unverified=True
    )
    assert any("resumed from" in m and "step 4" in m for m in messages)
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 8
