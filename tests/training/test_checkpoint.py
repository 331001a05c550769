"""Training: loss falls, checkpoints round-trip, exact resume, divergence, schedules, eval."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from highway_transformer.api import build_model, load_pretrained
from highway_transformer.config import (
    Config,
    TrainConfig,
)
from highway_transformer.data.corpora import load_corpus
from highway_transformer.errors import CheckpointError, ConfigError, TrainingDiverged
from highway_transformer.storage.folder import MODEL_FILE
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.tasks.lm_eval import evaluate
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.optim import LRSchedule
from highway_transformer.training.trainer import Trainer, train


def _comparable(records: list[dict]) -> list[tuple]:
    """Metric records without wall-clock fields."""
    return [(r["step"], r["split"], r["loss"], r.get("lr"), r.get("tokens")) for r in records]


# ------------------------------------------------------------------ learning


def test_loss_falls_on_a_tiny_corpus(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(
        text_file,
        **{
            "model.d_model": 32,
            "model.dropout": 0.0,
            "train.max_steps": 60,
            "train.eval_interval": 30,
            "train.log_interval": 10,
        },
    )
    trainer = Trainer(config, tmp_path / "run", progress=False)
    initial = evaluate(trainer.model, trainer.task.corpus.valid, config.data).loss
    assert initial > 1.5  # ~ln(vocabulary size) before training
    results = trainer.fit()
    assert results["steps"] == 60
    assert results["valid"]["loss"] < 0.5 * initial
    assert results["test"]["loss"] < 0.5 * initial
    train_losses = [r["loss"] for r in read_metrics(tmp_path / "run") if r["split"] == "train"]
    assert len(train_losses) == 6 and train_losses[-1] < train_losses[0]
    for name in ("results.json", "metrics.csv", "config.yaml"):
        assert (tmp_path / "run" / name).is_file()
    assert (tmp_path / "run" / "best" / MODEL_FILE).is_file()


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


# ------------------------------------------------------------------ divergence


def test_nan_loss_raises_and_keeps_the_last_checkpoint(
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tiny_lm_config: Callable[..., Config],
) -> None:
    run = tmp_path / "run"
    config = tiny_lm_config(text_file, **{"train.eval_interval": 2, "train.max_steps": 10})
    trainer = Trainer(config, run, progress=False)
    real_nll = trainer.model.token_nll

    def poisoned(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        nll = real_nll(hidden, targets)
        if trainer.model.training and trainer.state.step >= 4:  # computing step 5
            return nll * float("nan")
        return nll

    monkeypatch.setattr(trainer.model, "token_nll", poisoned)
    with pytest.raises(TrainingDiverged, match="at step 5"):
        trainer.fit()
    state = ckpt.load_trainer_state(run / "checkpoint")
    assert state.step == 4
    model, saved_config, vocab = load_pretrained(run / "checkpoint")
    assert vocab == trainer.task.vocab and saved_config.model == trainer.config.model
    with torch.no_grad():
        hidden, _ = model(trainer.task.corpus.valid[:16].view(2, 8))
    assert torch.isfinite(hidden).all()


def test_huge_learning_rate_diverges(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(
        text_file,
        **{
            "train.optimizer": "sgd",
            "train.lr": 1e30,
            "train.clip": 0,
            "train.eval_interval": 1,
            "train.max_steps": 6,
        },
    )
    with pytest.raises(TrainingDiverged, match=r"at step \d+") as info:
        train(config, tmp_path / "run", progress=False)
    assert "train.lr" in str(info.value)
    # the first update already gives infinite weights: no checkpoint of them was written
    assert "at step 1" in str(info.value)
    assert not (tmp_path / "run" / "checkpoint").exists()


# ------------------------------------------------------------------ schedules


def test_linear_schedule() -> None:
    s = LRSchedule(TrainConfig(lr=2.0, schedule="linear", max_steps=10, min_lr=0.0))
    assert s.lr(0) == pytest.approx(2.0)
    assert s.lr(5) == pytest.approx(1.0)
    assert s.lr(9) == pytest.approx(0.2)
    assert s.lr(10) == pytest.approx(0.0)
    floor = LRSchedule(TrainConfig(lr=2.0, schedule="linear", max_steps=10, min_lr=0.5))
    assert floor.lr(5) == pytest.approx(1.25) and floor.lr(10) == pytest.approx(0.5)


def test_cosine_schedule_with_warmup() -> None:
    s = LRSchedule(TrainConfig(lr=1.0, schedule="cosine", warmup_steps=4, max_steps=14, min_lr=0.1))
    assert [s.lr(i) for i in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert s.lr(4) == pytest.approx(1.0)
    assert s.lr(9) == pytest.approx(0.55)  # halfway: (lr + min_lr) / 2
    assert s.lr(14) == pytest.approx(0.1)
    assert s.lr(100) == pytest.approx(0.1)


def test_constant_schedule_with_warmup() -> None:
    s = LRSchedule(TrainConfig(lr=0.3, schedule="constant", warmup_steps=3, max_steps=10))
    assert [s.lr(i) for i in range(5)] == pytest.approx([0.1, 0.2, 0.3, 0.3, 0.3])


def test_anneal_schedule() -> None:
    config = TrainConfig(
        lr=1.0, schedule="anneal", anneal_factor=0.25, anneal_patience=1, min_lr=0.01
    )
    s = LRSchedule(config)
    assert s.lr(0) == 1.0
    assert s.observe_validation(5.0) is False  # first: the best so far
    assert s.observe_validation(4.0) is False  # improved
    assert s.observe_validation(4.5) is False  # 1 bad evaluation: within patience
    assert s.lr(10) == 1.0
    assert s.observe_validation(4.2) is True  # 2nd bad evaluation: anneal
    assert s.lr(10) == pytest.approx(0.25)
    assert s.observe_validation(3.0) is False and s.lr(10) == pytest.approx(0.25)
    for _ in range(6):
        s.observe_validation(9.0)
    assert s.lr(10) == pytest.approx(0.01)  # never below min_lr
    restored = LRSchedule(config)
    restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert restored.state_dict() == s.state_dict() and restored.lr(3) == s.lr(3)


def test_non_anneal_schedules_ignore_stalls() -> None:
    s = LRSchedule(TrainConfig(lr=1.0, schedule="linear", max_steps=10))
    assert not any(s.observe_validation(v) for v in (1.0, 2.0, 3.0, 4.0))
    assert s.lr(0) == 1.0 and s.best == 1.0


# ------------------------------------------------------------------ evaluation


@pytest.mark.parametrize(
    ("eval_batch", "seq_len", "context"), [(4, 16, 4), (3, 7, 0), (1, 5, 4), (16, 64, 8)]
)
def test_evaluate_counts_every_target_once(
    text_file: Path,
    eval_batch: int,
    seq_len: int,
    context: int,
    tiny_lm_config: Callable[..., Config],
) -> None:
    config = tiny_lm_config(
        text_file,
        **{"data.eval_batch_size": eval_batch, "data.seq_len": seq_len, "data.context": context},
    )
    corpus = load_corpus(config.data)
    config.model.vocab_size = len(corpus.vocab)
    torch.manual_seed(0)
    model = build_model(config.model)
    result = evaluate(model, corpus.valid, config.data)
    assert result.tokens == corpus.valid.numel() - 1
    assert math.isfinite(result.loss) and result.loss > 0
    assert result.bits == pytest.approx(result.loss / math.log(2))
    assert model.training  # evaluate restores the mode
    capped = evaluate(model, corpus.valid, config.data, max_tokens=20)
    assert capped.tokens == 20


def test_evaluate_equals_a_single_full_pass(
    text_file: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(text_file, **{"data.eval_batch_size": 1, "data.eval_seq_len": 200})
    corpus = load_corpus(config.data)
    config.model.vocab_size = len(corpus.vocab)
    torch.manual_seed(0)
    model = build_model(config.model).eval()
    ids = corpus.valid
    assert ids.numel() <= 200
    with torch.no_grad():
        hidden, _ = model(ids[None, :-1])
        expected = model.token_nll(hidden, ids[None, 1:]).mean().item()
    result = evaluate(model, ids, config.data)
    assert result.loss == pytest.approx(expected, rel=1e-5)
