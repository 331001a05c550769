"""Checkpoints (``training/checkpoint.py``): a saved model round-trips, a resumed run equals an
uninterrupted one bit for bit, and resuming into another model or vocabulary is refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from highway_transformer.api import build_model, load_pretrained
from highway_transformer.config import (
    Config,
)
from highway_transformer.data.corpora import load_corpus
from highway_transformer.errors import CheckpointError, ConfigError
from highway_transformer.storage.folder import MODEL_FILE
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.trainer import Trainer, train


def _comparable(records: list[dict]) -> list[tuple]:
    """Metric records without wall-clock fields."""
    return [(r["step"], r["split"], r["loss"], r.get("lr"), r.get("tokens")) for r in records]


def test_checkpoint_round_trip(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(text_file, **{"model.tie_weights": True})
    corpus = load_corpus(config.data)
    config.model.vocab_size = len(corpus.vocab)
    torch.manual_seed(0)
    model = build_model(config.model).eval()
    with torch.no_grad():  # nonzero gate biases, so they must really be saved
        for bias in model.gate_biases().values():
            bias.uniform_(-1, 1)
    folder = ckpt.save_checkpoint(tmp_path / "ck", model, config, corpus.vocab)
    loaded, loaded_config, vocab = load_pretrained(folder)
    assert not loaded.training
    assert loaded_config == config and vocab == corpus.vocab
    assert loaded.output.weight is loaded.embedding.weight
    tokens = corpus.valid[:20].view(2, 10)
    with torch.no_grad():
        expected = model.logits(model(tokens)[0])
        got = loaded.logits(loaded(tokens)[0])
    assert torch.equal(got, expected)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_pretrained(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="weights only"):
        ckpt.load_trainer_state(folder)


# ------------------------------------------------------------------ exact resume


def _final_weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoint" / MODEL_FILE))


def _assert_same_run(a: Path, b: Path) -> None:
    records_a, records_b = read_metrics(a), read_metrics(b)
    assert _comparable(records_a) == _comparable(records_b)
    assert {r["split"] for r in records_a} == {"train", "valid"}
    weights_a, weights_b = _final_weights(a), _final_weights(b)
    assert weights_a.keys() == weights_b.keys()
    for name in weights_a:
        assert torch.equal(weights_a[name], weights_b[name]), name
    results_a = json.loads((a / "results.json").read_text())
    results_b = json.loads((b / "results.json").read_text())
    assert results_a["valid"] == results_b["valid"] and results_a["test"] == results_b["test"]


def test_exact_resume_after_extending_max_steps(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    full = tiny_lm_config(text_file)  # dropout 0.1, context > 0, constant lr
    train(full, tmp_path / "one", progress=False)
    half = tiny_lm_config(text_file, **{"train.max_steps": 4})
    train(half, tmp_path / "two", progress=False)
    assert json.loads((tmp_path / "two" / "results.json").read_text())["steps"] == 4
    results = train(tiny_lm_config(text_file), tmp_path / "two", resume=True, progress=False)
    assert results["steps"] == 8
    _assert_same_run(tmp_path / "one", tmp_path / "two")


def test_exact_resume_after_interruption(
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tiny_lm_config: Callable[..., Config],
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
) -> None:
    """An interrupted linear-decay run, continued with --resume, equals an uninterrupted one."""
    overrides = {
        "train.schedule": "linear",
        "train.warmup_steps": 2,
        "train.optimizer": "sgd",
        "train.momentum": 0.9,
        "train.lr": 0.5,
        "train.max_steps": 12,
        "model.dropout_attn": 0.1,
        "data.seq_len": 8,  # several passes over the training stream
        "data.context": 2,
        "data.max_train_tokens": 200,
    }
    train(tiny_lm_config(text_file, **overrides), tmp_path / "one", progress=False)

    with monkeypatch.context() as patch:
        interrupt_after_step(patch, 4)
        with pytest.raises(KeyboardInterrupt):
            train(tiny_lm_config(text_file, **overrides), tmp_path / "two", progress=False)
    assert ckpt.load_trainer_state(tmp_path / "two" / "checkpoint").step == 4
    torch.manual_seed(12345)  # the resumed run must not depend on the global RNG state
    train(tiny_lm_config(text_file, **overrides), tmp_path / "two", resume=True, progress=False)
    _assert_same_run(tmp_path / "one", tmp_path / "two")


def test_resume_with_another_model_config(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    run = tmp_path / "run"
    train(tiny_lm_config(text_file, **{"train.max_steps": 4}), run, progress=False)
    other = tiny_lm_config(text_file, **{"model.d_model": 32})
    with pytest.raises(CheckpointError, match="model.d_model"):
        train(other, run, resume=True, progress=False)
    gated = tiny_lm_config(text_file, **{"model.gate.kind": "highway"})
    with pytest.raises(CheckpointError, match="model.gate"):
        Trainer(gated, run, progress=False).resume()


def test_resume_with_another_vocabulary_is_refused(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    run = tmp_path / "run"
    train(tiny_lm_config(text_file, **{"train.max_steps": 4}), run, progress=False)
    weights_before = _final_weights(run)
    other_text = tmp_path / "other.txt"
    other_text.write_text("0123456789 " * 200, encoding="utf-8")
    with pytest.raises(CheckpointError, match="another vocabulary"):
        train(tiny_lm_config(other_text), run, resume=True, progress=False)
    after = _final_weights(run)
    assert all(torch.equal(after[k], weights_before[k]) for k in after)


def test_refuses_to_overwrite_a_checkpoint(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    run = tmp_path / "run"
    train(tiny_lm_config(text_file, **{"train.max_steps": 4}), run, progress=False)
    metrics_before = (run / "metrics.jsonl").read_text()
    weights_before = _final_weights(run)
    with pytest.raises(ConfigError, match="--resume"):
        train(tiny_lm_config(text_file), run, progress=False)
    assert (run / "metrics.jsonl").read_text() == metrics_before
    after = _final_weights(run)
    assert all(torch.equal(after[k], weights_before[k]) for k in after)


def test_resume_without_checkpoint_starts_fresh(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    trainer = Trainer(tiny_lm_config(text_file), tmp_path / "fresh", progress=False)
    assert trainer.resume() is False
    assert trainer.state.step == 0
