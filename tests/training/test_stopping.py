"""A stop signal (SIGTERM, Ctrl-C) ends a run at a step boundary with a checkpoint there, one
line saying so, the folder unlocked, and a resume that continues the same run: for
``highway train``, ``highway train --nproc 2`` and ``highway run --jobs 2``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from highway_transformer.errors import TrainingInterrupted
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.runlock import LOCK_FILE
from highway_transformer.training.stopping import StopRequests
from highway_transformer.training.trainer import Trainer, train

LONG = ["train.max_steps=100000", "train.eval_interval=100000", "train.log_interval=1"]


def train_losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(run) if r["split"] == "train"}


def test_sigterm_stops_at_that_step_and_resume_continues_the_same_run(
    tmp_path, lm_config, monkeypatch
):
    config = lm_config(**{"train.eval_interval": 8, "train.log_interval": 2})
    train(config, tmp_path / "whole", progress=False)
    one_step = Trainer._train_step

    def signal_in_step_3(trainer: Trainer, *args, **kwargs):
        if trainer.state.step == 2:  # step 3 runs: between two log steps
            os.kill(os.getpid(), signal.SIGTERM)
        return one_step(trainer, *args, **kwargs)

    run = tmp_path / "run"
    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(Trainer, "_train_step", signal_in_step_3)
    with pytest.raises(TrainingInterrupted, match="stopped by SIGTERM: checkpoint at step 3 of 8"):
        train(config, run, progress=False)
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGTERM) is handler  # the handler is only lent
    assert ckpt.load_trainer_state(run / "checkpoint").step == 3
    assert not (run / LOCK_FILE).exists() and not (run / "results.json").exists()
    train(config, run, resume=True, progress=False)
    # the same losses, the window of steps 3-4 included (its step 3 trained before the stop)
    assert train_losses(run) == train_losses(tmp_path / "whole")
    assert sorted(train_losses(run)) == [2, 4, 6, 8]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signal")
@pytest.mark.parametrize("name", ["SIGHUP", "SIGUSR1", "SIGUSR2"])
def test_a_closed_terminal_or_a_schedulers_warning_asks_to_stop_too(name: str) -> None:
    """SIGHUP: the terminal closed; USR1/USR2: a scheduler's warning before preemption or the
    time limit (Slurm's ``--signal``), sent to every process of the job."""
    number = getattr(signal, name)
    with StopRequests() as stops:
        os.kill(os.getpid(), number)
        time.sleep(0.1)
        assert stops.signal_number == number


def test_ctrl_c_after_a_forwarded_sigterm_still_checkpoints() -> None:
    """``highway run`` passes SIGTERM on while the terminal's SIGINT may still be on its way."""
    with StopRequests() as stops:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        assert stops.signal_number == signal.SIGTERM


def test_a_second_ctrl_c_interrupts_at_once() -> None:
    with StopRequests() as stops, pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        assert stops.signal_number == signal.SIGINT
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the handler raises here


# --------------------------------------------------------------------------- processes


def start(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "highway_transformer.cli", *args]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)


def stop_once_training(process: subprocess.Popen[str], runs: list[Path]) -> str:
    """SIGTERM ``process`` once every run in ``runs`` logged a step; its standard error."""
    try:
        deadline = time.monotonic() + 180
        while not all((run / "metrics.jsonl").is_file() and train_losses(run) for run in runs):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    return stderr


def assert_stopped_at_a_checkpoint(run: Path) -> None:
    step = ckpt.load_trainer_state(run / "checkpoint").step
    assert step >= max(train_losses(run)) >= 1
    assert not (run / LOCK_FILE).exists()


def tiny_lm(text_file: Path) -> list[str]:
    return [
        "--preset", "ht-table1/t-l3", "model.d_model=16", "model.n_heads=2",
        "model.d_inner=32", "data.corpus=file", f"data.path={text_file}", "data.seq_len=12",
        "data.context=4", "data.batch_size=4", "data.eval_batch_size=4", "train.threads=1",
    ]  # fmt: skip


def test_highway_train_stops_on_sigterm_with_one_line(tmp_path, text_file):
    run = tmp_path / "run"
    process = start(["train", *tiny_lm(text_file), *LONG, "--out", str(run), "--no-progress"])
    stderr = stop_once_training(process, [run])
    assert process.returncode == 128 + signal.SIGTERM
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM: checkpoint at step "), stderr[-1500:]
    assert last.endswith("continue with --resume") and stderr.count("stopped by") == 1
    assert_stopped_at_a_checkpoint(run)


def test_two_processes_stop_together_at_a_checkpoint(tmp_path, text_file):
    run = tmp_path / "run"
    args = ["train", "--nproc", "2", *tiny_lm(text_file), *LONG, "--out", str(run)]
    process = start([*args, "--no-progress"])
    stderr = stop_once_training(process, [run])
    assert process.returncode == 128 + signal.SIGTERM, stderr[-1500:]
    # one line for the run (the launcher's, in rank 0's words): where the checkpoint is
    stops = [line for line in stderr.splitlines() if "stopped by" in line]
    assert len(stops) == 1 and stderr.strip().endswith(stops[0]), stderr[-1500:]
    step = ckpt.load_trainer_state(run / "checkpoint").step
    assert stops[0] == (
        f"stopped by SIGTERM: checkpoint at step {step} of 100000 in {run / 'checkpoint'}; "
        "continue with --resume"
    )
    assert "death signal" not in stderr  # torch's launcher's own log lines: not shown
    assert_stopped_at_a_checkpoint(run)


def test_runner_passes_the_stop_on_to_its_runs(tmp_path, text_file):
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    overrides = [
        "data.corpus=file", f"data.path={text_file}", "data.level=char", *LONG,
    ]  # fmt: skip
    process = start(
        ["run", *rows, "--scale", "tiny", "--jobs", "2", "--out", str(tmp_path), "--no-progress",
         *overrides]
    )  # fmt: skip
    runs = [tmp_path / "ht-table1" / "tiny" / row.split("/")[1] / "seed1" for row in rows]
    stderr = stop_once_training(process, runs)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-1500:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM: ht-table1/t-l3 seed 1, ht-table1/t-l3+sigmoid")
    assert "the same `highway run` (or `highway ab`) command resumes them" in last
    for run in runs:
        assert_stopped_at_a_checkpoint(run)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_rows_of_a_killed_runner_checkpoint_and_stop(tmp_path, text_file):
    overrides = ["data.corpus=file", f"data.path={text_file}", "data.level=char", *LONG]
    process = start(
        ["run", "ht-table1/t-l3", "--scale", "tiny", "--jobs", "2", "--out", str(tmp_path),
         "--no-progress", *overrides]
    )  # fmt: skip
    run = tmp_path / "ht-table1" / "tiny" / "t-l3" / "seed1"
    try:
        deadline = time.monotonic() + 180
        while not ((run / "metrics.jsonl").is_file() and train_losses(run)):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        process.kill()  # SIGKILL: the runner cannot pass anything on
        process.wait(timeout=30)
        log = run / "train.log"
        while "stopped by SIGTERM" not in log.read_text():
            assert time.monotonic() < deadline + 120, log.read_text()[-1500:]
            time.sleep(0.2)
        while (run / LOCK_FILE).exists():  # the row exits just after its last line
            assert time.monotonic() < deadline + 150
            time.sleep(0.2)
    finally:
        process.kill()
    assert_stopped_at_a_checkpoint(run)


def test_runner_in_this_process_stops_with_the_runner_wording(tmp_path, text_file, monkeypatch):
    from highway_transformer.experiments import run_experiments

    one_step = Trainer._train_step

    def signal_in_step_2(trainer: Trainer, *args, **kwargs):
        if trainer.state.step == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return one_step(trainer, *args, **kwargs)

    monkeypatch.setattr(Trainer, "_train_step", signal_in_step_2)
    overrides = ["data.corpus=file", f"data.path={text_file}", "train.max_steps=6"]
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    with pytest.raises(TrainingInterrupted, match=r"t-l3 seed 1 stopped at a checkpoint; the same"):
        run_experiments(rows, tmp_path, "tiny", overrides=overrides)
    run = tmp_path / "ht-table1" / "tiny" / "t-l3" / "seed1"
    assert ckpt.load_trainer_state(run / "checkpoint").step == 2
    assert not (tmp_path / "ht-table1" / "tiny" / "t-l3+sigmoid").exists()  # not started
