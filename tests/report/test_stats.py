"""Report statistics against hand-computed values."""

from __future__ import annotations

import pytest

from highway_transformer.report.stats import (
    fraction_target,
    paired_difference,
    plateaued,
    steps_to_fraction,
    summary,
    t_interval,
)

BASELINE = [(100, 3.0), (200, 2.0), (300, 1.6), (400, 1.5), (500, 1.5)]
FALLING = [(100, 3.0), (200, 2.5), (300, 2.0), (400, 1.5), (500, 1.0)]


def test_summary_is_mean_and_sample_std() -> None:
    assert summary([1.0, 2.0, 4.0]) == pytest.approx({"mean": 7 / 3, "std": 1.5275252, "n": 3})
    assert summary([2.0, None]) == {"mean": 2.0, "std": 0.0, "n": 1}
    assert summary([]) is None


def test_paired_difference_by_seed_with_a_t_interval() -> None:
    # diffs -0.1, -0.2, -0.2: mean -1/6, std 0.0577350, sem 1/30, t(0.975, 2) = 4.3026527.
    row = {1: 1.0, 2: 1.2, 3: 1.1, 4: 0.5}  # seed 4 has no baseline run: left out
    base = {1: 1.1, 2: 1.4, 3: 1.3}
    d = paired_difference(row, base)
    assert d is not None
    assert d["n"] == 3
    assert d["per_seed"] == pytest.approx({"1": -0.1, "2": -0.2, "3": -0.2})
    assert d["mean"] == pytest.approx(-1 / 6)
    assert d["std"] == pytest.approx(0.0577350, abs=1e-7)
    half = 4.3026527 / 30
    assert d["interval"] == pytest.approx([-1 / 6 - half, -1 / 6 + half], abs=1e-6)
    assert d["verdict"] == "lower"


def test_paired_difference_verdicts() -> None:
    unresolved = paired_difference({1: 1.0, 2: 1.3}, {1: 1.1, 2: 1.2})
    assert unresolved is not None and unresolved["verdict"] == "unresolved"
    higher = paired_difference({1: 2.0, 2: 2.1, 3: 2.2}, {1: 1.0, 2: 1.05, 3: 1.1})
    assert higher is not None and higher["verdict"] == "higher"
    one = paired_difference({1: 1.0}, {1: 1.5})
    assert one is not None and one["interval"] is None and one["verdict"] is None
    assert paired_difference({1: 1.0}, {2: 1.0}) is None
    assert t_interval([1.0]) is None


def test_steps_to_a_fraction_of_the_baselines_improvement() -> None:
    # Baseline: 3.0 -> best 1.5; half the improvement is 2.25, 90 % is 1.65.
    assert fraction_target(BASELINE, 0.5) == pytest.approx(2.25)
    assert fraction_target(BASELINE, 0.9) == pytest.approx(1.65)
    assert steps_to_fraction(BASELINE, BASELINE, 0.5) == 200
    assert steps_to_fraction(BASELINE, BASELINE, 0.9) == 300
    row = [(100, 2.2), (200, 1.7), (300, 1.4)]
    assert steps_to_fraction(row, BASELINE, 0.5) == 100
    assert steps_to_fraction(row, BASELINE, 0.9) == 300
    assert steps_to_fraction([(100, 2.9), (200, 2.6)], BASELINE, 0.5) is None
    assert steps_to_fraction(row, [], 0.5) is None


def test_plateau_needs_a_flat_tail() -> None:
    assert plateaued(BASELINE)
    assert not plateaued(FALLING)
    assert not plateaued(BASELINE[:2])
