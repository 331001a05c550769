"""Runs that did not learn say so (``tasks/floor.py``): the check against the task's trivial
baselines, the warning line, and the trainer writing both at the end of training."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.config import Config
from highway_transformer.data.baselines import ngram_nll
from highway_transformer.tasks.floor import MARGIN, learning_check, plateau_warning
from highway_transformer.training.trainer import train


def test_the_best_baseline_decides_with_a_one_percent_margin() -> None:
    baselines = {"unigram": 3.0, "bigram": 2.5}
    at_plateau = learning_check(2.499, baselines)
    assert at_plateau is not None and at_plateau["baseline"] == "bigram"
    assert at_plateau["gap"] == pytest.approx(0.001) and at_plateau["learned"] is False
    assert learning_check(2.5 * (1 - MARGIN) - 1e-9, baselines)["learned"] is True
    assert learning_check(2.0, {}) is None  # a task without trivial baselines: no check


def test_the_warning_names_the_baseline_and_both_losses_in_the_unit_asked() -> None:
    check = learning_check(2.9924, {"unigram": 2.9920})
    line = plateau_warning(check, "runs/plain", 1 / math.log(2), "bits per character")
    assert line is not None and "\n" not in line
    assert line.startswith("warning: runs/plain did not learn beyond the trivial baselines")
    assert "validation 4.3171 bits per character against the unigram model's 4.3165" in line
    assert plateau_warning(learning_check(1.0, {"unigram": 2.9}), "x") is None
    assert plateau_warning(None, "x") is None


@pytest.fixture
def pattern_config(tmp_path: Path, tiny_lm_config: Callable[..., Config]) -> Callable[..., Config]:
    text = tmp_path / "pattern.txt"
    text.write_text("abcabd abcabe xyzzy. " * 200, encoding="utf-8")
    fixed = {
        "model.dropout": 0.0,
        "model.init": "torch",
        "model.tie_weights": False,
        "train.max_steps": 40,
        "train.eval_interval": 20,
    }
    return lambda **overrides: tiny_lm_config(text, **{**fixed, **overrides})


def test_a_run_that_cannot_learn_warns_and_records_it(pattern_config, tmp_path, capsys) -> None:
    config = pattern_config(**{"train.lr": 1e-12})
    messages: list[str] = []
    results = train(config, tmp_path / "stuck", progress=False, log=messages.append)
    check = results["learned"]
    assert check["learned"] is False and set(check["baselines"]) == {"unigram", "bigram"}
    assert check["loss"] == results["valid"]["loss"]
    warnings = [m for m in messages if m.startswith("warning:")]
    assert len(warnings) == 1 and "did not learn beyond the trivial baselines" in warnings[0]
    assert results["level"] == "char"


def test_a_run_that_learns_does_not_warn(pattern_config, tmp_path) -> None:
    config = pattern_config()
    messages: list[str] = []
    results = train(config, tmp_path / "learns", progress=False, log=messages.append)
    check = results["learned"]
    assert check["learned"] is True and check["loss"] < check["baseline_loss"] * (1 - MARGIN)
    assert not [m for m in messages if m.startswith("warning:")]


def test_the_lm_baselines_are_the_unigram_and_bigram_of_the_validation_split(
    pattern_config,
) -> None:
    import torch

    from highway_transformer.tasks import LMTask

    task = LMTask(pattern_config(), torch.device("cpu"))
    found = task.trivial_losses("valid")
    vocab = len(task.corpus.vocab)
    expected = ngram_nll(task.corpus.train, task.corpus.valid, vocab, 2)
    assert found["bigram"] == pytest.approx(expected)
    assert found["unigram"] > found["bigram"]
