"""The toy translation task (``tasks/seq2seq.py``): fixed evaluation sets, fresh training
pairs that resume exactly, the loss counted over real target tokens, metrics in range."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from highway_transformer.config import Config
from highway_transformer.data.seq2seq import PAD_ID
from highway_transformer.errors import ConfigError
from highway_transformer.tasks.seq2seq import Seq2SeqTask

CPU = torch.device("cpu")


@pytest.fixture
def config(tiny_task_config: Callable[..., Config]) -> Config:
    return tiny_task_config("seq2seq/toy", **{"task.length": 6, "train.eval_max_tokens": 70})


def test_evaluation_sets_are_fixed_and_apart_from_training(config: Config) -> None:
    a, b = Seq2SeqTask(config, CPU), Seq2SeqTask(config, CPU)
    for split in ("valid", "test"):
        assert all(torch.equal(a.eval_sets[split][k], b.eval_sets[split][k]) for k in ("src",))
        assert len(a.eval_sets[split]["src"]) == 10  # 70 tokens of 7-step sentences
    assert not torch.equal(a.eval_sets["valid"]["src"], a.eval_sets["test"]["src"])
    with pytest.raises(ConfigError, match="^task.length .* must be >= 1, got 0$"):
        Seq2SeqTask(config.replace(**{"task.length": 0}), CPU)


def test_training_pairs_are_fresh_each_step_and_resume_exactly(config: Config) -> None:
    task = Seq2SeqTask(config, CPU)
    batches = task.train_batches()
    first, second = next(batches), next(batches)
    assert not torch.equal(first["src"], second["src"]) or first["src"].shape != second["src"].shape
    state = task.state_dict()
    ahead = next(batches)
    again = Seq2SeqTask(config, CPU)
    again.load_state_dict(state)
    assert torch.equal(next(again.train_batches())["src"], ahead["src"])


def test_the_loss_counts_the_real_target_tokens_and_metrics_are_fractions(config: Config) -> None:
    task = Seq2SeqTask(config, CPU)
    torch.manual_seed(0)
    model = task.build_model(config).eval()
    batch = next(task.train_batches())
    loss, count = task.loss(model, batch)
    assert count == int((batch["tgt_out"] != PAD_ID).sum()) and loss.dim() == 0
    metrics = task.evaluate(model, "valid")
    assert set(metrics) == {"loss", "token_accuracy", "exact_match"}
    assert metrics["loss"] > 0 and 0 <= metrics["token_accuracy"] <= 1
    assert 0 <= metrics["exact_match"] <= 1


def test_the_trivial_model_is_the_source_blind_decoder_near_its_entropy(config: Config) -> None:
    # sources of 3..6 letters, each uniform over 10: a decoder blind to the source pays ln 10
    # a letter and, at each step, the surprise of ending (or not) given the letters so far
    task = Seq2SeqTask(config.replace(**{"train.eval_max_tokens": 7000}), CPU)
    found = task.trivial_losses("valid")
    lengths = range(3, 7)
    nats = 0.0
    for n in lengths:  # each length equally likely
        for t in range(n):
            left = sum(1 for m in lengths if m >= t)
            nats += math.log(10) - math.log(1 - (1 / left if t in lengths else 0.0))
        nats -= math.log(1 / sum(1 for m in lengths if m >= n))
    entropy = nats / sum(n + 1 for n in lengths)
    assert set(found) == {"source-blind decoder"}
    assert found["source-blind decoder"] == pytest.approx(entropy, rel=0.02)
    torch.manual_seed(0)
    untrained = task.evaluate(task.build_model(config).eval(), "valid")["loss"]
    assert untrained > found["source-blind decoder"]  # an untrained decoder is no better
