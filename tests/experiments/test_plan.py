"""Run plans (``experiments/plan.py``): the run-folder layout, seeds, and the order of runs."""

from __future__ import annotations

import json
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


def _frozen(spec) -> dict | None:
    from highway_transformer.experiments.plan import frozen_comparison

    return frozen_comparison(spec)


def test_a_new_run_freezes_the_registered_comparison_once(
    tmp_path: Path, word_corpus: Path
) -> None:
    from highway_transformer.experiments.comparisons import registered_comparison
    from highway_transformer.experiments.plan import write_experiment_file

    spec = plan_runs("ht-table1/t-l3+tanh", tmp_path, "tiny", data_path=word_corpus)[0]
    write_experiment_file(spec)
    frozen = _frozen(spec)
    assert frozen is not None
    assert frozen["fingerprint"] == registered_comparison("ht-table1").to_json()["fingerprint"]
    assert "code_sha256" in frozen["registered_with"]
    edited = {**frozen, "registered_with": {"commit": "earlier"}}
    path = spec.run_dir / "experiment.json"
    data = json.loads(path.read_text())
    data["comparison"] = edited
    path.write_text(json.dumps(data))
    write_experiment_file(spec)  # a rewrite (a resume) keeps what was frozen first
    assert _frozen(spec) == edited


def test_a_run_that_trained_unregistered_is_not_registered_afterwards(
    tmp_path: Path, word_corpus: Path
) -> None:
    from highway_transformer.experiments.plan import write_experiment_file

    spec = plan_runs("ht-table1/t-l3", tmp_path, "tiny", data_path=word_corpus)[0]
    spec.run_dir.mkdir(parents=True)
    (spec.run_dir / "results.json").write_text("{}")
    write_experiment_file(spec)
    assert _frozen(spec) is None


def test_a_table_that_froze_another_comparison_is_refused(
    tmp_path: Path, word_corpus: Path
) -> None:
    from highway_transformer.experiments.plan import check_existing, write_experiment_file

    spec = plan_runs("ht-table1/t-l3", tmp_path, "tiny", data_path=word_corpus)[0]
    write_experiment_file(spec)
    path = spec.run_dir / "experiment.json"
    data = json.loads(path.read_text())
    data["comparison"]["fingerprint"] = "0123456789abcdef"
    path.write_text(json.dumps(data))
    (spec.run_dir / "checkpoint").mkdir()  # interrupted: it would resume
    with pytest.raises(ConfigError, match="froze the comparison 0123456789abcdef"):
        check_existing(spec)


def test_scale_change_lines_name_each_row_once_and_leave_out_the_overrides(tmp_path) -> None:  # noqa: ANN001
    from highway_transformer.experiments.plan import plan_runs, scale_change_lines

    rows = ["ht-table1/t-l3", "ht-table1/t-l3+tanh"]
    overrides = ["train.max_steps=7"]
    specs = plan_runs(rows, tmp_path, "tiny", seeds=2, overrides=overrides)
    lines = scale_change_lines(specs, None, overrides)
    assert [line.split(":")[0] for line in lines] == rows  # once a row, not once a seed
    assert all(": scale tiny changed " in line for line in lines)
    assert "model.d_model 512 -> 32" in lines[0]
    assert all("train.max_steps" not in line for line in lines)  # the user's, not the scale's
    assert scale_change_lines(plan_runs(rows, tmp_path, "paper"), None, ()) == []
