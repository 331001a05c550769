"""Report statistics against hand-computed values."""

from __future__ import annotations

import pytest

from highway_transformer.report.stats import (
    best_periodic,
    count_name,
    difference,
    fraction_target,
    learned_check,
    mean,
    means_on_shared_seeds,
    paired_difference,
    plateaued,
    scored_count,
    seeds_better,
    steps_to_fraction,
    summary,
    t_interval,
)
from highway_transformer.tasks.floor import learning_check

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


def test_means_and_seeds_better_read_the_shared_seeds_only() -> None:
    row = {1: 1.0, 2: 1.2, 3: 1.1, 4: 0.5}  # seed 4 has no baseline run: left out
    base = {1: 1.1, 2: 1.1, 3: 1.3, 5: 9.0}
    assert mean(row.values()) == pytest.approx(3.8 / 4) and mean([None]) is None
    assert means_on_shared_seeds(row, base) == pytest.approx((3.3 / 3, 3.5 / 3))
    assert means_on_shared_seeds(row, {7: 1.0}) == (None, None)
    assert seeds_better(row, base, "bpc") == (2, 3)  # lower is better: seeds 1 and 3
    assert seeds_better(row, base, "accuracy") == (1, 3)  # higher is better: seed 2


def test_a_difference_of_two_scores_is_a_tie_within_196_standard_errors() -> None:
    close = difference(2.0, 0.03, 2.1, 0.04)  # se 0.05: |0.1| <= 0.098 is false
    assert close["difference"] == pytest.approx(-0.1) and close["se"] == pytest.approx(0.05)
    assert close["tie"] is False
    assert difference(2.0, 0.03, 2.09, 0.04)["tie"] is True
    assert difference(2.0, None, 2.1, 0.04) == {"difference": pytest.approx(-0.1), "se": None,
                                                "tie": None}  # fmt: skip


def test_periodic_validation_and_what_a_score_counted() -> None:
    records = [
        {"step": 10, "split": "train", "loss": 0.5},
        {"step": 10, "split": "valid", "loss": 2.0, "loss_se": 0.1, "tokens": 300},
        {"step": 20, "split": "valid", "loss": 1.5, "loss_se": 0.2, "tokens": 300},
    ]
    assert best_periodic(records) == (1.5, 0.2)  # the training loss is not validation
    assert scored_count(records[1]) == 300 and count_name(records[1]) == "tokens"
    assert scored_count({"loss": 1.0, "examples": 12}) == 12
    assert count_name({"examples": 12}) == "examples" and count_name(None) == "items"
    assert scored_count(None) is None


def test_the_learned_check_is_the_recorded_one_unless_baselines_are_added() -> None:
    recorded = learning_check(2.0, {"unigram": 3.0})
    results = {"valid": {"loss": 2.0}, "learned": recorded}
    assert learned_check(results) is recorded and learned_check(None) is None
    models = {"trigram": {"valid": {"loss": 1.8}}}
    added = learned_check(results, models)
    assert added is not None and added["learned"] is False and added["baseline"] == "trigram"
