"""Runs annealed on validation (``report/annealing.py``): where each run's rate changed, and
rows set against their baseline before either run annealed."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_report_says_where_a_validation_annealed_rate_changed(tmp_path) -> None:

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
