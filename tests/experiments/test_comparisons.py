"""Registered comparisons (``experiments/comparisons.py``): one rule per table, fixed in
advance, with a fingerprint that changes with any part of it."""

from __future__ import annotations

import dataclasses

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.experiments import EXPERIMENTS, TABLES
from highway_transformer.experiments.comparisons import (
    comparison_from_json,
    fingerprint,
    registered_comparison,
)


@pytest.mark.parametrize("table", [t for t in TABLES if t != "ht-table7"])
def test_every_table_registers_pairs_of_its_own_rows(table: str) -> None:
    comparison = registered_comparison(table)
    assert comparison.pairs, table
    assert (comparison.split, comparison.checkpoint, comparison.step) == ("valid", "last", "end")
    for pair in comparison.pairs:
        assert EXPERIMENTS[pair.row].table == table
        assert EXPERIMENTS[pair.against].table == table
        assert pair.row != pair.against


def test_ht_table4_sets_each_gate_against_plain_and_parameter_matched_plain() -> None:
    pairs = {(p.row, p.against) for p in registered_comparison("ht-table4").pairs}
    base = "ht-table4/rt-l3"
    for gate in ("+sigmoid", "+tanh"):
        assert (base + gate, base) in pairs
        assert (base + gate, base + "+param-matched") in pairs
    assert (base + "+param-matched", base) in pairs


def test_json_round_trip_and_fingerprint() -> None:
    comparison = registered_comparison("ht-table1")
    data = comparison.to_json()
    assert comparison_from_json(data) == comparison
    assert data["fingerprint"] == fingerprint(data)
    moved = dataclasses.replace(comparison, checkpoint="best").to_json()
    assert moved["fingerprint"] != data["fingerprint"]
    assert registered_comparison("ht-table1").to_json() == data  # the same each time


def test_malformed_frozen_comparisons_are_one_line_errors() -> None:
    data = registered_comparison("rt-table2").to_json()
    with pytest.raises(ConfigError, match="malformed"):
        comparison_from_json({k: v for k, v in data.items() if k != "pairs"})
    with pytest.raises(ConfigError, match="checkpoint"):
        comparison_from_json({**data, "checkpoint": "median"})
    with pytest.raises(ConfigError, match="no comparison"):
        registered_comparison("ht-table99")
