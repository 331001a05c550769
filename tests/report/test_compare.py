"""Comparing ``highway train`` folders (``report/compare.py``): the baseline's best periodic
validation loss is the target, each run's step to reach it, the table and files written,
and one-line errors for folders that cannot be compared."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from highway_transformer.errors import DataError
from highway_transformer.report.compare import compare_runs, load_run, run_labels

LN2 = math.log(2)


def _run(folder: Path, valid: list[float], results: bool = True) -> Path:
    folder.mkdir(parents=True)
    records = []
    for i, loss in enumerate(valid, start=1):
        records.append({"step": 10 * i, "split": "train", "loss": loss + 0.2})
        records.append({"step": 10 * i, "split": "valid", "loss": loss, "tokens": 500})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if results:
        figures = {"valid": {"bpc": valid[-1] / LN2}, "test": {"bpc": 1.25}}
        (folder / "results.json").write_text(json.dumps({"parameters": 1234, **figures}))
    return folder


def test_each_run_reaches_the_baselines_best_or_not(tmp_path: Path) -> None:
    plain = _run(tmp_path / "plain", [2.0, 1.5, 1.2, 1.1])
    gated = _run(tmp_path / "gated", [1.8, 1.1, 1.0, 0.9])
    slow = _run(tmp_path / "slow", [2.2, 1.9, 1.7, 1.6], results=False)
    summary = compare_runs([plain, gated, slow], tmp_path / "out")
    assert summary["baseline"] == "plain" and summary["target_valid_loss"] == 1.1
    rows = {r["run"]: r for r in summary["rows"]}
    assert [rows[n]["steps_to_target"] for n in ("plain", "gated", "slow")] == [40, 20, None]
    assert rows["gated"]["best_periodic_valid_bpc"] == pytest.approx(0.9 / LN2)
    assert rows["gated"]["final_test_bpc"] == 1.25 and rows["slow"]["final_test_bpc"] is None
    assert (rows["plain"]["parameters"], rows["plain"]["steps"]) == (1234, 40)
    assert rows["plain"]["periodic_valid_tokens"] == 500
    out = tmp_path / "out"
    assert json.loads((out / "compare.json").read_text()) == summary
    table = (out / "compare.md").read_text()
    assert "| gated | 1,234 | 40 | 1.2984 | 20 | 1.2984 | 1.2500 |" in table
    assert "| slow | – | 40 | 2.3083 | not reached | – | – |" in table
    assert "(the first 500 validation symbols)" in table
    assert Path(summary["plot"]).is_file()


def test_another_baseline_sets_the_target(tmp_path: Path) -> None:
    runs = [_run(tmp_path / "a", [2.0, 1.5]), _run(tmp_path / "b", [1.8, 1.0])]
    summary = compare_runs(runs, tmp_path / "out", baseline="b", title="Mine")
    assert summary["target_valid_loss"] == 1.0
    assert [r["steps_to_target"] for r in summary["rows"]] == [None, 20]
    assert (tmp_path / "out" / "compare.md").read_text().startswith("# Mine\n")


def test_runs_that_share_a_name_are_labelled_by_path(tmp_path: Path) -> None:
    dirs = [tmp_path / "x" / "run", tmp_path / "y" / "run"]
    assert run_labels(dirs) == [str(d) for d in dirs]
    assert run_labels([tmp_path / "a", tmp_path / "b"]) == ["a", "b"]


def test_folders_that_cannot_be_compared_are_one_line_errors(tmp_path: Path) -> None:
    good = _run(tmp_path / "good", [2.0, 1.5])
    with pytest.raises(DataError, match="named twice"):
        compare_runs([good, good], tmp_path / "out")
    with pytest.raises(DataError, match=r"^--baseline 'other' is not one of the runs: good$"):
        compare_runs([good], tmp_path / "out", baseline="other")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no validation records in metrics.jsonl"):
        load_run(tmp_path / "empty")
