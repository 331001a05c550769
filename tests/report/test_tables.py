"""The report's tables (``report/tables.py``): mean curves."""

from __future__ import annotations


def test_curves_leave_out_a_last_partial_log_interval(tmp_path) -> None:  # noqa: ANN001
    from highway_transformer.report.runs import RunRecord
    from highway_transformer.report.tables import mean_curve

    records = [
        {"step": 10, "split": "train", "loss": 2.0},
        {"step": 20, "split": "train", "loss": 1.5},
        {"step": 23, "split": "train", "loss": 0.2},  # the mean of 3 steps, not 10
        {"step": 23, "split": "valid", "loss": 1.4},
    ]
    run = RunRecord(tmp_path, {"name": "x"}, {"train": {"log_interval": 10}}, None, records)
    assert [s for s, _, _ in mean_curve([run], "train", "loss")] == [10, 20]
    assert [s for s, _, _ in mean_curve([run], "valid", "loss")] == [23]
