"""The generated tasks (``tasks/synthetic.py``): copy memory and the adding problem train, and a
sequence longer than ``task.max_len`` is a one-line error."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import DataError
from highway_transformer.training.trainer import train


def test_copy_memory_runs(tmp_path, rt_preset_config: Callable[..., Config]):
    config = rt_preset_config(
        "copy/rtransformer",
        **{
            "task.length": 10,
            "train.max_steps": 5,
            "train.eval_interval": 5,
            "train.eval_max_tokens": 3000,
        },
    )
    results = train(config, tmp_path, progress=False)
    valid = results["valid"]
    assert 0.0 <= valid["accuracy"] <= 1.0 and math.isfinite(valid["loss"])
    assert valid["baseline_loss"] == pytest.approx(10 * math.log(8) / 30)
    assert valid["loss_se"] > 0
    assert results["learned"]["baselines"] == {"memoryless": valid["baseline_loss"]}


def test_adding_runs_and_learns_something(tmp_path, rt_preset_config: Callable[..., Config]):
    config = rt_preset_config(
        "adding/transformer",
        **{
            "task.length": 20,
            "train.max_steps": 60,
            "train.eval_interval": 30,
            "train.eval_max_tokens": 4000,
        },
    )
    results = train(config, tmp_path, progress=False)
    assert results["test"]["mse"] < 0.5
    assert results["steps"] == 60
    assert results["valid"]["loss_se"] > 0
    # always predicting 1: E[(y - 1)^2] of the sum of two U(0, 1) values is 1/6
    assert results["learned"]["baselines"]["constant 1"] == pytest.approx(1 / 6, abs=0.02)


def test_generated_task_max_len_violation(tmp_path, rt_preset_config: Callable[..., Config]):
    config = rt_preset_config("copy/transformer", **{"task.length": 20, "task.max_len": 30})
    with pytest.raises(DataError, match="task.max_len=30"):
        train(config, tmp_path, progress=False)
