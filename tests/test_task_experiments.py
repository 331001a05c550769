"""`highway run` / `highway report` on the R-Transformer task tables (pixels, music)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer import cli

#: Tiny budgets on top of the tiny scale: one layer, two steps, one evaluation.
TINY = ["train.max_steps=2", "train.eval_interval=2", "model.n_layers=1", "--no-progress"]


def _report(capsys: pytest.CaptureFixture[str], runs: Path, out: Path) -> str:
    assert cli.main(["report", str(runs), "--out", str(out)]) == 0
    capsys.readouterr()
    return (out / "index.md").read_text(encoding="utf-8")


def test_rt_table1_trains_pixels_and_reports_accuracy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sklearn")
    args = ["run", "rt-table1", "--scale", "tiny", "--out", str(tmp_path / "runs")]
    # digits: the offline stand-in for MNIST (same task, 8x8 images)
    assert cli.main([*args, "task.dataset=digits", "data.eval_batch_size=512", *TINY]) == 0
    runs = tmp_path / "runs" / "rt-table1" / "tiny"
    for row in ("transformer", "rtransformer"):
        results = json.loads((runs / row / "seed1" / "results.json").read_text())
        assert results["task"] == "pixels" and 0.0 <= results["test"]["accuracy"] <= 1.0
        assert "bpc" not in results["test"]
    index = _report(capsys, runs, tmp_path / "report")
    assert "| test accuracy |" in index and "positive is better for accuracy" in index
    # the direction table words "better" from the task registry: accuracy is higher-better
    assert "| higher at equal steps | seeds higher (paired) |" in index
    assert "lower at equal steps" not in index
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    rows = {r["name"]: r for r in report["paper_table"]}
    transformer = json.loads((runs / "transformer" / "seed1" / "results.json").read_text())
    accuracy = rows["rt-table1/transformer"]["test_accuracy"]["mean"]
    assert accuracy == pytest.approx(100 * transformer["test"]["accuracy"])  # the paper's %


def test_rt_table2_trains_music_with_two_jobs_and_reports_nll(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_music_file: Callable[..., Path]
) -> None:
    pytest.importorskip("scipy.io")
    mat = write_music_file(tmp_path / "tiny.mat")
    args = ["run", "rt-table2", "--scale", "tiny", "--jobs", "2", "--out", str(tmp_path / "runs")]
    assert cli.main([*args, f"task.dataset={mat}", *TINY]) == 0
    runs = tmp_path / "runs" / "rt-table2" / "tiny"
    for row in ("transformer", "rtransformer"):
        results = json.loads((runs / row / "seed1" / "results.json").read_text())
        assert results["task"] == "music" and results["test"]["nll"] > 0
    index = _report(capsys, runs, tmp_path / "report")
    assert "| test nll |" in index and "negative is better for nll" in index
    assert "| lower at equal steps | seeds lower (paired) |" in index
