"""Learning-rate schedules (``training/optim.py``): linear, cosine and constant with warmup,
annealing on validation with the rules of the word- and char-PTB scripts (state resumes
exactly), the step schedule of the image script, and the presets that use them."""

from __future__ import annotations

import json

import pytest

from highway_transformer.config import TrainConfig
from highway_transformer.errors import ConfigError
from highway_transformer.experiments import get_experiment
from highway_transformer.presets import get_preset
from highway_transformer.training.optim import LRSchedule
from highway_transformer.validation import validate


def _window(rule: str = "window", window: int = 5, after: int = 5, factor: float = 0.5):  # noqa: ANN202
    return TrainConfig(lr=2.0, schedule="anneal", anneal_rule=rule, anneal_window=window,
                       anneal_after=after, anneal_factor=factor)  # fmt: skip


def test_window_rule_halves_when_no_better_than_the_worst_of_the_last_five() -> None:
    s = LRSchedule(_window())
    # Epochs 1-5 never anneal, even when worse (the RT code: `epoch > 5`).
    assert [s.observe_validation(v) for v in (5.0, 4.0, 6.0, 3.0, 7.0)] == [False] * 5
    assert s.lr(0) == 2.0
    # Epoch 6: 6.5 < max(5, 4, 6, 3, 7) = 7: no anneal, though it is no new best.
    assert s.observe_validation(6.5) is False
    # Epoch 7: window (4, 6, 3, 7, 6.5), max 7; 7.0 >= 7: halve.
    assert s.observe_validation(7.0) is True and s.lr(0) == pytest.approx(1.0)
    # Epoch 8: window (6, 3, 7, 6.5, 7), 2.0 improves: kept.
    assert s.observe_validation(2.0) is False and s.lr(0) == pytest.approx(1.0)


def test_window_strict_needs_a_worse_validation() -> None:
    s = LRSchedule(_window("window-strict", window=3, factor=0.1))
    for v in (5.0, 4.0, 3.0, 3.0, 3.0):
        s.observe_validation(v)
    assert s.observe_validation(3.0) is False  # equal to max(3, 3, 3): not worse
    assert s.observe_validation(3.5) is True and s.lr(0) == pytest.approx(0.2)


def test_window_state_resumes_exactly() -> None:
    a = LRSchedule(_window())
    for v in (5.0, 4.0, 6.0, 3.0, 7.0, 6.5):
        a.observe_validation(v)
    b = LRSchedule(_window())
    b.load_state_dict(a.state_dict())
    assert b.observe_validation(7.0) == a.observe_validation(7.0) is True
    assert b.state_dict() == a.state_dict()


def test_anneal_rule_outside_the_anneal_schedule_is_an_error() -> None:
    config = get_preset("ht-table1/t-l3")
    with pytest.raises(ConfigError, match="anneal_rule=window applies to train.schedule=anneal"):
        validate(config.replace(**{"train.anneal_rule": "window"}))
    with pytest.raises(ConfigError, match="anneal rule"):
        validate(config.replace(**{"train.anneal_rule": "sometimes"}))


def test_presets_use_the_rt_scripts_rules() -> None:
    word = get_preset("ht-table3/t-l3").train
    assert (word.anneal_rule, word.anneal_window, word.anneal_after, word.anneal_factor) == (
        "window",
        5,
        5,
        0.5,
    )
    assert "RT code language_word" in get_preset("ht-table3/t-l3").source
    char = get_preset("rt-paper/char-ptb").train
    assert (char.schedule, char.anneal_rule, char.anneal_window, char.anneal_factor) == (
        "anneal",
        "window-strict",
        3,
        0.1,
    )


def test_rt_tables_3_4_train_the_rt_code_settings() -> None:
    for row in ("rt-table3/transformer", "rt-table3/rtransformer", "rt-table4/transformer"):
        config = get_experiment(row).config()
        assert config.model.norm == "pre", row
        assert config.train.schedule == "anneal", row
    assert get_experiment("rt-table3/transformer").config().model.family == "transformer"


def test_step_schedule_divides_every_lr_step_steps() -> None:
    s = LRSchedule(TrainConfig(lr=1e-3, schedule="step", anneal_factor=0.1, lr_step=4))
    assert [s.lr(step) for step in (0, 3)] == [1e-3, 1e-3]
    assert s.lr(4) == pytest.approx(1e-4) and s.lr(11) == pytest.approx(1e-5)
    assert s.observe_validation(1.0) is False  # validations do not move it


def test_step_schedule_and_lr_step_go_together() -> None:
    config = get_preset("ht-table1/t-l3")
    with pytest.raises(ConfigError, match="train.lr_step=0 with train.schedule=step"):
        validate(config.replace(**{"train.schedule": "step"}))
    with pytest.raises(ConfigError, match="train.lr_step=5 with train.schedule=linear"):
        validate(config.replace(**{"train.lr_step": 5}))


def test_rt_image_preset_decays_every_ten_epochs_at_every_scale() -> None:
    from highway_transformer.experiments.plan import experiment_config
    from highway_transformer.presets.rt_tables import MNIST_STEPS_PER_EPOCH

    mnist = get_preset("rt-table1/rtransformer").train
    assert (mnist.schedule, mnist.anneal_factor, mnist.lr_step, mnist.clip) == (
        "step",
        0.1,
        10 * MNIST_STEPS_PER_EPOCH,
        0.0,
    )
    scaled = experiment_config(get_experiment("rt-table1/rtransformer"), "cpu").train
    assert scaled.lr_step * 5 == scaled.max_steps  # the same four decays over the run


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
