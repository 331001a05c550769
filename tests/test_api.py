"""The checked entry points (``api.py``): a model built from a validated config, a checkpoint
loaded with its config and vocabulary, and a checkpoint's metrics on its task's splits."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from highway_transformer.api import build_model, evaluate_checkpoint, load_pretrained
from highway_transformer.config import Config, ModelConfig
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import CheckpointError, ConfigError
from highway_transformer.models.lm import LanguageModel
from highway_transformer.storage.folder import MODEL_FILE, read_config
from highway_transformer.storage.runfolder import read_results
from highway_transformer.training.trainer import train


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_lm_config: Callable[..., Config]) -> Path:
    """A tiny language model trained for 4 steps (checkpoint/ and best/)."""
    root = tmp_path_factory.mktemp("api")
    text = root / "text.txt"
    text.write_text("abcabd abcabe xyzzy. " * 60, encoding="utf-8")
    config = tiny_lm_config(text, **{"train.max_steps": 4, "train.eval_interval": 2})
    train(config, root / "run", progress=False)
    return root / "run"


def test_build_model_validates_first(tiny_model_config: Callable[..., ModelConfig]) -> None:
    model = build_model(tiny_model_config(vocab_size=11))
    assert isinstance(model, LanguageModel) and model.embedding.weight.shape == (11, 16)
    with pytest.raises(ConfigError, match="n_heads"):
        build_model(tiny_model_config(vocab_size=11, n_heads=3))  # 16 is not 3 heads wide


def test_load_pretrained_gives_the_model_config_and_vocabulary(run: Path) -> None:
    model, config, vocab = load_pretrained(run)  # a run folder: its checkpoint/
    assert not model.training and isinstance(vocab, Vocabulary)
    assert config == read_config(run / "checkpoint") and len(vocab) == config.model.vocab_size
    saved = load_file(str(run / "checkpoint" / MODEL_FILE))
    state = model.state_dict()
    assert all(torch.equal(state[name], tensor) for name, tensor in saved.items())


def test_a_vocabulary_of_another_run_is_refused(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "checkpoint"
    shutil.copytree(run / "checkpoint", copy)
    (copy / "manifest.json").unlink()  # a hand-edited folder: read unchecked when trusted
    Vocabulary(list("xyz"), "char").save(copy / "vocab.json")
    with pytest.raises(CheckpointError, match="has 3 symbols but the model was built for 11"):
        load_pretrained(copy, trust_unverified=True)


def test_evaluate_checkpoint_scores_the_splits_as_the_run_did(run: Path) -> None:
    metrics = evaluate_checkpoint(run / "best")
    results = read_results(run)
    assert metrics["valid"] == pytest.approx(results["valid"], rel=1e-6)
    assert metrics["test"] == pytest.approx(results["test"], rel=1e-6)
    short = evaluate_checkpoint(run / "best", ["valid"], overrides=["data.max_eval_tokens=21"])
    assert list(short) == ["valid"] and short["valid"]["tokens"] == 20  # the overrides apply
    assert metrics["valid"]["tokens"] > 20
    with pytest.raises(ConfigError, match="^unknown split 'train'; choose valid or test$"):
        evaluate_checkpoint(run / "best", ["train"])
