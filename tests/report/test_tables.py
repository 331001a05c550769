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


def test_the_seed_band_is_the_range_over_seeds_where_two_or_more_logged(tmp_path) -> None:  # noqa: ANN001
    from highway_transformer.report.runs import RunRecord
    from highway_transformer.report.tables import seed_band

    def run(seed: int, losses: dict[int, float]) -> RunRecord:
        records = [{"step": s, "split": "valid", "loss": v, "time": s} for s, v in losses.items()]
        return RunRecord(tmp_path / str(seed), {"name": "x", "seed": seed}, {}, None, records)

    runs = [run(1, {10: 2.0, 20: 1.5}), run(2, {10: 2.4, 20: 1.1}), run(3, {10: 2.2})]
    assert seed_band(runs, "valid", "loss") == [(10, 10.0, 2.0, 2.4), (20, 20.0, 1.1, 1.5)]
    assert seed_band(runs[:1], "valid", "loss") == []  # one seed: no band
