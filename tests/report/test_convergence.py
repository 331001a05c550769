"""Convergence measures (``report/convergence.py``): curves from metric records, the best value,
and the first step and time a curve reaches a target."""

from __future__ import annotations

import math

from highway_transformer.report.convergence import (
    best_value,
    curve,
    steps_to_reach,
    time_to_reach,
)

RECORDS = [
    {"step": 20, "split": "valid", "loss": 1.5, "time": 8.0},
    {"step": 10, "split": "valid", "loss": 2.0, "time": 4.0},
    {"step": 10, "split": "train", "loss": 2.2, "bpc": 3.2},
    {"step": 30, "split": "valid", "loss": 1.2, "time": 12.0},
    {"step": 30, "split": "valid", "loss": 1.1, "time": 12.5},  # a repeated step: the last
    {"step": 40, "split": "valid", "ppl": 3.0},  # no loss: not on the loss curve
]


def test_a_curve_is_one_splits_values_in_step_order() -> None:
    assert curve(RECORDS, "valid") == [(10, 2.0), (20, 1.5), (30, 1.1)]
    assert curve(RECORDS, "train", "bpc") == [(10, 3.2)]
    assert curve(RECORDS, "test") == []


def test_the_best_value_and_the_first_step_that_reaches_a_target() -> None:
    points = curve(RECORDS, "valid")
    assert best_value(points) == 1.1 and best_value([]) == math.inf
    assert steps_to_reach(points, 1.5) == 20  # at or below
    assert steps_to_reach(points, 2.5) == 10
    assert steps_to_reach(points, 1.0) is None


def test_the_training_time_at_which_a_target_is_reached() -> None:
    valid = [r for r in RECORDS if "loss" in r]
    assert time_to_reach(valid, "valid", 1.5) == 8.0
    assert time_to_reach(valid, "valid", 0.5) is None
    untimed = [{"step": 1, "split": "valid", "loss": 1.0}]
    assert math.isnan(time_to_reach(untimed, "valid", 2.0))
