"""The language-modelling task (``tasks/lm.py``): the vocabulary size taken from the data on a
copy of the config, the loss as (sum, count), a stream of windows that resumes exactly, and a
checkpoint of another vocabulary refused."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.config import Config
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import CheckpointError, ConfigError
from highway_transformer.storage.folder import write_manifest
from highway_transformer.tasks.lm import LMTask
from highway_transformer.validation import validate

CPU = torch.device("cpu")


@pytest.fixture
def config(lm_config: Callable[..., Config]) -> Config:
    return validate(lm_config(**{"data.context": 0, "data.seq_len": 8}))


def test_the_vocabulary_size_comes_from_the_data_on_a_copy(config: Config) -> None:
    task = LMTask(config, CPU)
    assert config.model.vocab_size == 0  # the caller's config stays as it is
    assert task.config.model.vocab_size == len(task.vocab) == 11  # 10 symbols and <unk>
    with pytest.raises(ConfigError, match="^model.vocab_size=7 but the corpus has 11 symbols"):
        LMTask(config.replace(**{"model.vocab_size": 7}), CPU)


def test_the_loss_is_a_sum_over_every_target_of_the_window(config: Config) -> None:
    task = LMTask(config, CPU)
    model = task.build_model(task.config).eval()
    batch = next(task.train_batches())
    x, y, loss_start, k = batch
    assert (x.shape, y.shape, loss_start, k) == ((4, 8), (4, 8), 0, 0)
    total, count = task.loss(model, batch)
    assert count == 32
    mean = model(x.long(), targets=y.long()).loss
    assert total.item() == pytest.approx(mean.item() * 32, rel=1e-5)
    assert task.loss_metrics(math.log(2)) == {"bpc": pytest.approx(1.0), "ppl": pytest.approx(2.0)}


def test_the_stream_resumes_exactly(config: Config) -> None:
    task = LMTask(config, CPU)
    batches = task.train_batches()
    for _ in range(3):
        next(batches)
    state = task.state_dict()
    ahead = [next(batches)[0] for _ in range(5)]
    again = LMTask(config, CPU)
    again.load_state_dict(state)
    resumed = again.train_batches()
    assert all(torch.equal(next(resumed)[0], a) for a in ahead)


def test_a_checkpoint_of_another_vocabulary_is_refused(config: Config, tmp_path: Path) -> None:
    task = LMTask(config, CPU)
    task.write_checkpoint_files(tmp_path)
    (tmp_path / "config.json").write_text(task.config.to_json())  # a checkpoint folder
    write_manifest(tmp_path)
    task.check_checkpoint(tmp_path)  # its own vocabulary: fine
    Vocabulary(list("xyz"), "char").save(tmp_path / "vocab.json")
    write_manifest(tmp_path)  # another run's vocabulary, not a damaged file
    with pytest.raises(
        CheckpointError, match=r"trained with another vocabulary \(3 vs 11 symbols\)"
    ):
        task.check_checkpoint(tmp_path)


def test_a_counted_vocabulary_names_the_earlier_rule(config: Config, tmp_path: Path) -> None:
    """enwik8-xl and text8 count all three splits now; a run saved when they counted the
    training split resumes with data.vocab_splits=train, which the refusal names."""
    from highway_transformer.data.corpora import load_corpus

    text8 = LMTask(config.replace(**{"data.corpus": "text8"}), CPU, load_corpus(config.data))
    (tmp_path / "config.json").write_text(text8.config.to_json())
    Vocabulary(list("xyz"), "char").save(tmp_path / "vocab.json")
    write_manifest(tmp_path)
    with pytest.raises(CheckpointError, match=r"this corpus: data.vocab_splits=train\) or"):
        text8.check_checkpoint(tmp_path)


@pytest.mark.parametrize("layout", ["every", "reference"])
def test_the_scoring_reports_every_target(config: Config, layout: str) -> None:
    """The progress of an evaluation ends at the targets it scored; the metrics do not
    depend on it being reported."""
    family = {"model.family": "xl"} if layout == "reference" else {}
    task = LMTask(validate(config.replace(**{"data.eval_layout": layout, **family})), CPU)
    model = task.build_model(task.config).eval()
    reports: list[tuple[int, int]] = []
    with task.reporting(lambda done, total: reports.append((done, total))):
        metrics = task.evaluate(model, "valid")
    assert task.eval_progress is None  # reported inside only
    assert reports[-1] == (metrics["tokens"], metrics["tokens"])
    assert [done for done, _ in reports] == sorted(done for done, _ in reports)
    assert task.evaluate(model, "valid") == metrics
