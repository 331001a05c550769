"""The rl table's training scores: last-N success and return, and steps to 90% success."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from highway_transformer.report.report import write_report
from highway_transformer.report.runs import RunRecord
from highway_transformer.report.success import run_scores, success_rows

MakeRun = Callable[..., Path]
BASELINE = "gtrxl-rl/gtrxl-gru"
#: Environment steps a logged training step stands for, and the episodes' length: the
#: window of 4 episodes is full from 80 environment steps on (step 20).
STEPS_PER_LOG, EPISODE_LENGTH, WINDOW = 40, 17.0, 4


def _train_record(step: int, success: float) -> dict:
    return {
        "step": step, "split": "train", "loss": 0.1, "time": step / 10,
        "success_rate": success, "episodic_return": 2 * success - 1,
        "episode_length": EPISODE_LENGTH, "env_steps": float(step * STEPS_PER_LOG // 10),
    }  # fmt: skip


def _rl_run(root: Path, make_run: MakeRun, name: str, seed: int, success: list[float]) -> Path:
    """A finished rl run folder: training success ``success`` at steps 10, 20, 30, 40."""
    run_dir = make_run(root, name, [0.0, 0.0, 0.0, 0.0], 1.0, 1.0, 4.0, seed=seed)
    config = {
        "model": {"gate": {"kind": "none"}},
        "train": {"max_steps": 40},
        "task": {"name": "rl", "rl": {"stats_episodes": WINDOW}},
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    records = [_train_record(10 * (i + 1), s) for i, s in enumerate(success)]
    final = success[-1]
    records.append({"step": 40, "split": "valid", "loss": -final, "return": final,
                    "success": final, "time": 4.0})  # fmt: skip
    (run_dir / "metrics.jsonl").write_text(
        "\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8"
    )
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    figures = {"loss": -final, "return": final, "success": final}
    results.update(valid=figures, test=figures, final={"step": 40, "valid": figures,
                                                       "test": figures})  # fmt: skip
    (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return run_dir


def _record(seed: int, success: list[float]) -> RunRecord:
    records = [_train_record(10 * (i + 1), s) for i, s in enumerate(success)]
    config = {"task": {"name": "rl", "rl": {"stats_episodes": WINDOW}}}
    return RunRecord(Path("run"), {"name": BASELINE, "seed": seed}, config, records=records)


def test_steps_to_target_wait_for_a_full_window_and_censor_at_the_budget() -> None:
    # step 10 (40 env steps, 2.4 episodes): 1.0, but the window is not full; step 30: 0.95.
    reached = run_scores(_record(1, [1.0, 0.5, 0.95, 0.8]))
    assert reached == {
        "step": 40, "env_steps": 160.0, "last_success": 0.8, "last_return": pytest.approx(0.6),
        "steps_to_target": 120.0, "censored": False,
    }  # fmt: skip
    never = run_scores(_record(1, [0.5, 0.6, 0.89, 0.7]))
    assert never is not None and never["censored"] and never["steps_to_target"] == 160.0
    assert run_scores(RunRecord(Path("run"), {}, {}, records=[])) is None


def test_rows_are_paired_by_seed_with_the_baseline_and_count_the_censored() -> None:
    groups = {
        BASELINE: [_record(1, [0.5, 0.9, 1.0, 1.0]), _record(2, [0.5, 0.5, 0.9, 1.0])],
        "gtrxl-rl/trxl": [_record(1, [0.5, 0.5, 0.5, 0.9]), _record(2, [0.5, 0.5, 0.5, 0.5])],
    }
    section = success_rows(groups, BASELINE)
    assert section["target"] == 0.9 and section["stats_episodes"] == [WINDOW]
    base, trxl = section["rows"]
    assert base["is_baseline"] and base["paired"] == {} and base["censored"] == 0
    # baseline: 80 and 120 env steps; trxl: 160 (seed 1 at its last step), >160 (seed 2).
    assert [trxl["per_seed"][s]["steps_to_target"] for s in ("1", "2")] == [160.0, 160.0]
    assert trxl["censored"] == 1
    steps = trxl["paired"]["steps_to_target"]
    assert steps["per_seed"] == {"1": 80.0, "2": 40.0} and steps["mean"] == 60.0
    assert steps["interval"][0] < 60.0 < steps["interval"][1]
    success = trxl["paired"]["last_success"]
    assert success["per_seed"] == {"1": pytest.approx(-0.1), "2": pytest.approx(-0.5)}
    assert trxl["last_success"]["mean"] == pytest.approx(0.7)


def test_the_report_of_a_success_table_has_the_section(tmp_path: Path, make_run: MakeRun) -> None:
    root = tmp_path / "runs"
    curves = [
        ([0.5, 0.9, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]),
        ([0.5, 0.5, 0.95, 1.0], [0.5, 0.5, 0.6, 0.6]),
    ]
    for seed, (base, trxl) in enumerate(curves, start=1):
        _rl_run(root, make_run, BASELINE, seed, base)
        _rl_run(root, make_run, "gtrxl-rl/trxl", seed, trxl)
    report = write_report([root], tmp_path / "report")
    rows = {r["name"]: r for r in report["success"]["rows"]}
    assert rows["gtrxl-rl/trxl"]["censored"] == 2
    assert rows["gtrxl-rl/trxl"]["paired"]["steps_to_target"]["per_seed"] == {
        "1": 80.0, "2": 40.0,
    }  # fmt: skip
    saved = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert saved["success"] == report["success"]
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "## Training success and steps to success (exploratory)" in index
    assert "| s1 80, s2 120 | 0 of 2 | baseline |" in index
    assert "| s1 >160, s2 >160 | 2 of 2 | +60 [-194, +314] unresolved |" in index


def test_an_lm_report_has_no_success_section(tmp_path: Path, make_run: MakeRun) -> None:
    root = tmp_path / "runs"
    make_run(root, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 100.0)
    report = write_report([root], tmp_path / "report")
    assert "success" not in report
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "Training success" not in index
