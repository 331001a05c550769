"""Report statistics against hand-computed values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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


def _report_runs(root: Path, with_metadata: bool, make_run: Callable[..., Path]) -> None:
    import json

    for seed, (base, gated) in enumerate([(1.6, 1.5), (1.7, 1.55), (1.65, 1.6)], 1):
        make_run(root, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], base, base - 0.05, 100.0, seed)
        path = make_run(
            root, "ht-table1/t-l3+sigmoid", [1.8, 1.3, 1.1, 1.0], gated, gated - 0.05, 110.0, seed
        )
        if with_metadata:
            results = json.loads((path / "results.json").read_text())
            results["metadata"] = {"threads": 2, "device": "cpu", "precision": "fp32",
                                   "torch": "2.13.0"}  # fmt: skip
            (path / "results.json").write_text(json.dumps(results))


def test_report_json_holds_per_seed_values_paired_intervals_and_metadata(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    from highway_transformer.report.report import write_report

    _report_runs(tmp_path / "runs", with_metadata=True, make_run=make_run)
    report = write_report([tmp_path / "runs"], tmp_path / "report")
    rows = {r["name"]: r for r in report["paper_table"]}
    gated = rows["ht-table1/t-l3+sigmoid"]
    assert gated["per_seed"]["2"]["eval_bpc"] == pytest.approx(1.55)
    # eval diffs -0.1, -0.15, -0.05: mean -0.1, std 0.05, half width 4.3026527 * 0.05 / sqrt 3.
    paired = gated["eval_bpc_paired"]
    half = 4.3026527 * 0.05 / 3**0.5
    assert paired["mean"] == pytest.approx(-0.1)
    assert paired["interval"] == pytest.approx([-0.1 - half, -0.1 + half], abs=1e-6)
    assert paired["verdict"] == "unresolved"
    assert rows["ht-table1/t-l3"]["eval_bpc_paired"] is None
    # Mean validation curves: baseline 2.0 -> 1.1, the 50 % target 1.55 is reached at step 20.
    fractions = {r["name"]: r for r in report["fractions"]["rows"]}
    assert report["fractions"]["targets"]["0.5"] == pytest.approx(1.55)
    assert fractions["ht-table1/t-l3+sigmoid"]["steps"]["0.9"] == 30
    assert fractions["ht-table1/t-l3+sigmoid"]["ratio"]["0.9"] == pytest.approx(0.75)
    assert report["fractions"]["baseline_plateaued"] is False
    meta = {(r["name"], r["seed"]): r["metadata"] for r in report["runs"]}
    assert meta[("ht-table1/t-l3+sigmoid", 3)] == {"threads": 2, "device": "cpu",
        "precision": "fp32", "torch": "2.13.0", "train_seconds": 110.0,
        "stretches": None, "rate_changes": None}  # fmt: skip
    assert meta[("ht-table1/t-l3", 1)]["threads"] is None  # no metadata recorded: not invented
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "-0.1000 [-0.2242, +0.0242] unresolved" in index
    assert "| ht-table1/t-l3+sigmoid | 3 | 2 | cpu | fp32 | 2.13.0 | 110.0 | — |" in index


def test_stretch_summary_names_where_a_resumed_run_trained() -> None:
    from highway_transformer.report.markdown import stretch_summary

    machine = {"device": "cpu", "cpu_capability": "AVX2", "threads": 1, "torch": "2.13.0"}
    assert stretch_summary(None) == "—"
    assert stretch_summary([{"from_step": 0, "to_step": 9, **machine}]) == "1"
    resumed = [
        {"from_step": 0, "to_step": 400, "seconds": 60.0, "recorded": False},
        {"from_step": 400, "to_step": 900, "seconds": 70.0, **machine},
    ]
    assert stretch_summary(resumed) == (
        "2 (0–400: not recorded; 400–900: cpu AVX2, 1 thread, torch 2.13.0)"
    )


def test_report_says_where_a_validation_annealed_rate_changed(tmp_path) -> None:
    from pathlib import Path

    from highway_transformer.report.annealing import rate_changes
    from highway_transformer.report.markdown import runs_markdown
    from highway_transformer.report.runs import RunRecord

    def run(schedule: str, lrs: list[float]) -> RunRecord:
        records = [{"step": 100 * (i + 1), "split": "valid", "lr": lr} for i, lr in enumerate(lrs)]
        records.insert(1, {"step": 150, "split": "train", "loss": 1.0})  # no lr: skipped
        config = {"train": {"schedule": schedule}}
        return RunRecord(Path(tmp_path), {"name": "x"}, config, None, records)

    assert rate_changes(run("anneal", [2.0, 2.0, 1.0, 1.0, 0.5])) == [
        {"step": 300, "from": 2.0, "to": 1.0},
        {"step": 500, "from": 1.0, "to": 0.5},
    ]
    assert rate_changes(run("anneal", [2.0, 2.0])) == []
    assert rate_changes(run("cosine", [2.0, 1.0])) is None  # follows the step: same in every row
    meta = {"threads": 1, "device": "cpu", "precision": "fp32", "torch": "2.13.0"}
    rows = [
        {"name": "plain", "seed": 1, "metadata": {**meta, "rate_changes": [
            {"step": 27307, "from": 2.0, "to": 1.0}]}},
        {"name": "gated", "seed": 1, "metadata": {**meta, "rate_changes": []}},
    ]  # fmt: skip
    text = "\n".join(runs_markdown(rows))
    assert text.splitlines()[0].endswith("| learning rate annealed |")
    assert "| — | step 27,307: 2 → 1 |" in text
    assert "| — | never |" in text
    fixed = [{"name": "plain", "seed": 1, "metadata": meta}]
    assert "annealed" not in "\n".join(runs_markdown(fixed))  # no column for fixed schedules


def test_rows_against_their_baseline_before_either_run_annealed(tmp_path) -> None:
    from highway_transformer.report.annealing import before_annealing
    from highway_transformer.report.markdown import before_annealing_markdown
    from highway_transformer.report.runs import RunRecord

    def run(name: str, seed: int, ppl: list[float], lrs: list[float], schedule="anneal"):
        records = [
            {"step": 10 * (i + 1), "split": "valid", "ppl": v, "lr": lr, "tokens": 500}
            for i, (v, lr) in enumerate(zip(ppl, lrs, strict=True))
        ]
        config = {"train": {"schedule": schedule}}
        return RunRecord(tmp_path, {"name": name, "seed": seed}, config, None, records)

    # Seed 1: plain anneals at step 30, gated never: compared at 20 (not at 30, the stalled
    # validation that made plain anneal), 80 - 90. Seed 2: gated anneals at 20: at 10, 95 - 100.
    groups = {
        "plain": [run("plain", 1, [100, 90, 85], [2, 2, 1]),
                  run("plain", 2, [100, 88, 80], [2, 2, 2])],
        "gated": [run("gated", 1, [95, 80, 84], [2, 2, 2]),
                  run("gated", 2, [95, 85, 70], [2, 1, 1])],
    }  # fmt: skip
    table = [
        {"name": "plain", "baseline": "plain", "is_baseline": True},
        {"name": "gated", "baseline": "plain", "is_baseline": False},
    ]
    result = before_annealing(groups, table, "ppl")
    assert result is not None
    (row,) = result["rows"]
    assert row["per_seed"]["1"] == {"step": 20, "row": 80.0, "baseline": 90.0,
                                    "tokens": 500, "annealed": True}  # fmt: skip
    assert (row["per_seed"]["2"]["step"], row["per_seed"]["2"]["row"]) == (10, 95.0)
    assert row["paired"]["per_seed"] == pytest.approx({"1": -10.0, "2": -5.0})
    assert row["change_pct"] == pytest.approx((87.5 / 95 - 1) * 100)
    text = "\n".join(before_annealing_markdown(result))
    cells = "s1 20 (500 tokens): 80.00 − 90.00; s2 10 (500 tokens): 95.00 − 100.00"
    assert f"| gated | {cells} | -7.89% | -7.50 [" in text
    # Neither annealed: compared at the last validation both logged, marked as the end.
    groups["gated"][1] = run("gated", 2, [95, 85, 70], [2, 2, 2])
    point = before_annealing(groups, table, "ppl")["rows"][0]["per_seed"]["2"]
    assert (point["step"], point["row"], point["annealed"]) == (30, 70.0, False)
    fixed = {k: [run(r.name, r.seed, [1, 1, 1], [2, 2, 2], "cosine") for r in v]
             for k, v in groups.items()}  # fmt: skip
    assert before_annealing(fixed, table, "ppl") is None
    assert before_annealing_markdown(None) == []


def test_report_labels_the_table5_protocols() -> None:
    from highway_transformer.experiments import get_experiment
    from highway_transformer.report.markdown import protocols_markdown

    rows = [{"protocols": get_experiment("ht-table5/l6-xl").protocols}]
    text = "\n".join(protocols_markdown(rows))
    assert "*paper eval bpc*: validation during training (segment 128, memory 896" in text
    assert "*paper test bpc*: test protocol (segment 80, memory 2100" in text
    assert protocols_markdown([{"protocols": {}}]) == []


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


def test_direction_summary_does_not_count_the_param_matched_row(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    from highway_transformer.report.report import write_report

    root = tmp_path / "runs"
    make_run(root, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 100.0)
    make_run(root, "ht-table1/t-l3+sigmoid", [1.8, 1.3, 1.1, 1.0], 1.4, 1.3, 110.0)
    make_run(root, "ht-table1/t-l3+param-matched", [1.9, 1.4, 1.1, 1.0], 1.5, 1.4, 105.0)
    report = write_report([root], tmp_path / "report")
    rows = {r["name"]: r for r in report["direction"]}
    assert rows["ht-table1/t-l3+param-matched"]["param_matched"] is True
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "1 of 1 rows reached the baseline's best validation loss" in index
