"""Run plans (``experiments/plan.py``): the run-folder layout, seeds, and the order of runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.experiments import (
    plan_runs,
)


def test_plan_layout_and_seeds(tmp_path: Path, word_corpus: Path) -> None:
    specs = plan_runs("ht-table1/t-l3+tanh", tmp_path, "tiny", seeds=2, data_path=word_corpus)
    assert [s.run_dir for s in specs] == [
        tmp_path / "ht-table1" / "tiny" / "t-l3+tanh" / "seed1",
        tmp_path / "ht-table1" / "tiny" / "t-l3+tanh" / "seed2",
    ]
    assert [s.config.train.seed for s in specs] == [1111, 1112]
    assert specs[0].config.data.path == str(word_corpus)
    with pytest.raises(ConfigError):
        plan_runs("ht-table1", tmp_path, "tiny", seeds=0)


def test_plan_orders_runs_seed_by_seed(tmp_path: Path, word_corpus: Path) -> None:
    """Every row's first seed before any second seed: a table stopped part-way compares rows."""
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    specs = plan_runs(rows, tmp_path, "tiny", seeds=2, data_path=word_corpus)
    assert [(s.experiment.name, s.seed) for s in specs] == [
        ("ht-table1/t-l3", 1),
        ("ht-table1/t-l3+sigmoid", 1),
        ("ht-table1/t-l3", 2),
        ("ht-table1/t-l3+sigmoid", 2),
    ]
