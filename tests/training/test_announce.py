"""What a training says about its budget (training/announce.py) and its progress where no
terminal shows a bar: a start line with the steps and, where known, the time; the rate once
after the first log interval; plain lines, never tqdm's carriage returns or cursor codes."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.config import Config
from highway_transformer.experiments import estimate
from highway_transformer.training.rates import remember_rate
from highway_transformer.training.trainer import train

CURSOR_CODES = ("\r", "\x1b[")
ADDING = ["--task", "adding", "model.n_layers=1", "task.length=5", "train.max_steps=6",
          "train.log_interval=2", "train.eval_interval=3"]  # fmt: skip


def test_a_piped_train_says_its_budget_and_draws_no_bar(tmp_path: Path) -> None:
    """``highway train`` with its output piped (progress on, the default): the planned steps
    first, the rate measured over the first log interval once, no cursor codes."""
    argv = [sys.executable, "-m", "highway_transformer.cli", "train", *ADDING]
    done = subprocess.run(
        [*argv, "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert lines[0].endswith(
        ": 6 steps to train (train.max_steps=6); no rate measured on this kind of machine "
        "yet: the rate and the time left follow after the first 2 steps"
    ), lines[0]
    rate = [line for line in lines if "s/step over the first 2 steps here" in line]
    assert len(rate) == 1 and rate[0].endswith("of training left (4 steps)"), lines
    for code in CURSOR_CODES:
        assert code not in done.stderr and code not in done.stdout


def _adding(tiny_task_config: Callable[..., Config]) -> Config:
    return tiny_task_config("adding/transformer", **{"train.log_interval": 2})


def test_a_rate_known_here_prices_the_start_line(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    config = _adding(tiny_task_config)
    t = config.train
    here = estimate.machine_here(t.device, t.precision, torch.get_num_threads(), t.compile)
    remember_rate(config, here, 0.5, 10)
    lines: list[str] = []
    train(config, tmp_path, progress=False, log=lines.append)
    steps = t.max_steps
    assert lines[0] == (
        f"{config.name}: {steps:,} steps to train (train.max_steps={steps}); "
        f"≈ {estimate.duration(steps * 0.5)} at 0.5 s/step measured here"
    )
    assert not any("s/step over the first" in line for line in lines)  # known: not said again


def test_without_a_terminal_progress_is_plain_lines(
    tmp_path: Path,
    tiny_task_config: Callable[..., Config],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No bar where stderr is no terminal: what it would show, as a line at a log step
    (every PLAIN_EVERY seconds; every log step here)."""
    monkeypatch.setattr("highway_transformer.training.writers.PLAIN_EVERY", 0.0)
    monkeypatch.setattr("highway_transformer.tasks.progress.PLAIN_EVERY", 0.0)
    config = _adding(tiny_task_config)
    lines: list[str] = []
    train(config, tmp_path, progress=True, log=lines.append)
    plain = [line for line in lines if re.search(r": step \d+/\d+, loss ", line)]
    assert [line.split(", ")[0].split(": ")[1] for line in plain] == [
        f"step {s}/{config.train.max_steps}" for s in range(2, config.train.max_steps + 1, 2)
    ]
    assert all(re.search(r"items/s, ≈ .+ left$", line) for line in plain)
    err = capsys.readouterr().err
    assert "scoring valid: " in err  # the evaluations' lines, every PLAIN_EVERY seconds
    assert not any(code in err or code in "".join(lines) for code in CURSOR_CODES)
