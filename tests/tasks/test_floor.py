"""Runs that did not learn say so (``tasks/floor.py``): the check against the task's trivial
baselines, the warning line, and the trainer writing both at the end of training."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.config import Config
from highway_transformer.data.baselines import ngram_nll
from highway_transformer.tasks.floor import (
    MARGIN,
    best_check,
    learning_check,
    learning_hint,
    metric_unit,
    plateau_warning,
    withheld_reason,
)
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


def test_the_hint_names_the_runs_own_settings_and_no_init_it_already_has() -> None:
    preset = {"task.name": "music", "train.max_steps": 200, "train.lr": 1e-3,
              "train.optimizer": "adam", "train.warmup_steps": 0,
              "model.init": "torch"}  # fmt: skip
    hint = learning_hint(preset)
    assert "train.max_steps=200" in hint and "the music task" in hint
    assert "train.lr=0.001 with adam" in hint and "train.warmup_steps" in hint
    assert "model.init" not in hint  # the preset already uses PyTorch's initialisation
    sgd = learning_hint({**preset, "train.optimizer": "sgd", "model.init": "uniform"})
    assert "warm-up" not in sgd and "model.init=torch (this run used model.init=uniform)" in sgd


def test_the_best_trivial_model_at_hand_decides() -> None:
    """The report's lines to beat (trigram, logistic regression) join what the trainer
    recorded: a run below the class prior but above the regression did not learn."""
    recorded = learning_check(0.9, {"class prior": 2.3})
    assert recorded is not None and recorded["learned"] is True
    models = {"logistic regression": {"valid": {"loss": 0.3, "accuracy": 0.92}},
              "1-nearest neighbour": {"valid": {"accuracy": 0.97}}}  # fmt: skip
    check = best_check(0.9, recorded, models)
    assert check is not None and check["learned"] is False
    assert check["baseline"] == "logistic regression"
    assert set(check["baselines"]) == {"class prior", "logistic regression"}
    assert best_check(None, recorded, None) is recorded  # nothing to add: as recorded
    assert best_check(None, None, None) is None


def test_a_comparison_with_a_run_that_did_not_learn_is_withheld_in_the_summarys_unit() -> None:
    stuck = learning_check(2.9, {"bigram": 2.85})
    learned = learning_check(1.0, {"bigram": 2.85})
    convert, unit = metric_unit("bpc")
    reason = withheld_reason([("plain seed 1", stuck), ("sdu seed 1", learned)], convert, unit)
    assert reason is not None and reason.startswith(
        "withheld: plain seed 1 (4.1838 bpc) did not beat the bigram model (4.1117)"
    )
    assert "sdu" not in reason
    assert withheld_reason([("sdu seed 1", learned), ("x", None)]) is None  # None: unchecked
    assert metric_unit("bpc", "bpb")[1] == "bpb" and metric_unit("accuracy")[1] == "nats"
    to_return, unit = metric_unit("success")  # rl: the loss is minus a return, shown as one
    assert unit == "return" and to_return(-0.25) == 0.25
    lost = learning_check(0.16, {"memoryless policy": -0.16})
    reason = withheld_reason([("trxl seed 2", lost)], to_return, unit)
    assert reason == (
        "withheld: trxl seed 2 (-0.1600 return) did not beat the memoryless policy model (0.1600)"
    )
    shown = plateau_warning(stuck, "plain", *metric_unit("ppl"))
    assert shown is not None and "validation 18.1741 perplexity" in shown


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
