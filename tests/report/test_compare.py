"""Comparing ``highway train`` folders (``report/compare.py``): the baseline's best periodic
validation loss is the target, each run's step to reach it, ties within the evaluation's
standard error, the trivial baselines and plateau warnings, the table and files written,
and one-line errors for folders that cannot be compared."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from highway_transformer.errors import DataError
from highway_transformer.report.compare import (
    compare_runs,
    difference,
    load_compared,
    run_labels,
)
from highway_transformer.tasks.floor import learning_check

LN2 = math.log(2)


def _run(
    folder: Path,
    valid: list[float],
    results: bool = True,
    se: float | None = 0.001,
    data: dict | None = None,
    trivial: dict[str, float] | None = None,
) -> Path:
    folder.mkdir(parents=True)
    records = []
    for i, loss in enumerate(valid, start=1):
        records.append({"step": 10 * i, "split": "train", "loss": loss + 0.2})
        valid_record = {"step": 10 * i, "split": "valid", "loss": loss, "tokens": 500}
        records.append({**valid_record, **({} if se is None else {"loss_se": se})})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    config = {"task": {"name": "lm"}, "data": {"corpus": "pydoc", **(data or {})}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    if results:
        best = min(valid)
        figures = {
            "valid": {"loss": best, "bpc": best / LN2, "tokens": 900, "loss_se": se},
            "test": {"loss": 1.25, "bpc": 1.25 / LN2, "tokens": 800, "loss_se": se},
        }
        learned = learning_check(best, trivial or {"unigram": 3.0, "bigram": 2.5})
        payload = {"parameters": 1234, "level": "char", **figures, "learned": learned}
        (folder / "results.json").write_text(json.dumps(payload))
    return folder


def test_each_run_reaches_the_baselines_best_or_not(tmp_path: Path) -> None:
    plain = _run(tmp_path / "plain", [2.0, 1.5, 1.2, 1.1])
    gated = _run(tmp_path / "gated", [1.8, 1.1, 1.0, 0.9])
    slow = _run(tmp_path / "slow", [2.2, 1.9, 1.7, 1.6], results=False)
    summary = compare_runs([plain, gated, slow], tmp_path / "out")
    assert summary["baseline"] == "plain" and summary["target_valid_loss"] == 1.1
    assert summary["unit"] == "bits per character" and summary["scale"] == 1 / LN2
    rows = {r["run"]: r for r in summary["rows"]}
    assert [rows[n]["steps_to_target"] for n in ("plain", "gated", "slow")] == [40, 20, None]
    assert [rows[n]["target"] for n in ("plain", "gated", "slow")] == [
        "reached", "reached", "not reached"
    ]  # fmt: skip
    assert rows["gated"]["best_periodic_valid_loss"] == 0.9
    assert rows["gated"]["final_test_loss"] == 1.25 and rows["slow"]["final_test_loss"] is None
    assert (rows["plain"]["parameters"], rows["plain"]["steps"]) == (1234, 40)
    assert rows["plain"]["periodic_valid_count"] == 500
    assert (rows["plain"]["final_valid_count"], rows["plain"]["final_test_count"]) == (900, 800)
    versus = rows["gated"]["final_valid_vs_baseline"]
    assert versus["difference"] == pytest.approx(-0.2) and versus["tie"] is False
    out = tmp_path / "out"
    assert json.loads((out / "compare.json").read_text()) == summary
    table = (out / "compare.md").read_text()
    assert (
        "| gated | 1,234 | 40 | 1.2984 ± 0.0014 | 20 | 1.2984 ± 0.0014 | -0.2885 | "
        "1.8034 ± 0.0014 |" in table
    )
    assert "| slow | – | 40 | 2.3083 ± 0.0014 | not reached | – | – | – |" in table
    assert "500 tokens of the validation split" in table and "900 / 800 tokens" in table
    assert "One seed a row" in table and "bigram 3.6067" in table
    # each score says what it scored; the trivial models (the 900 final tokens) are not drawn
    # over curves of 500
    assert (
        "| best periodic valid (500 tokens) |" in table and "| final valid (900 tokens) |" in table
    )
    assert summary["trivial_drawn"] is False and "Not drawn in the figure" in table
    assert Path(summary["plot"]).is_file()


def test_a_difference_inside_the_evaluations_noise_is_a_tie_not_steps_to_target(
    tmp_path: Path,
) -> None:
    """The issue's case: two runs 0.0003 bits apart; each evaluation's standard error is
    larger, so no step to target is claimed and the final difference is a tie (both beat
    their trivial model here: at a plateau the comparison is withheld, the test below)."""
    plain = _run(tmp_path / "plain", [3.0, 2.9924], se=0.004, trivial={"unigram": 3.5})
    sigmoid = _run(tmp_path / "sigmoid", [3.0, 2.9922], se=0.004, trivial={"unigram": 3.5})
    rows = compare_runs([plain, sigmoid], tmp_path / "out")["rows"]
    assert rows[1]["target"] == "tie" and rows[1]["steps_to_target"] is None
    assert rows[1]["final_valid_vs_baseline"]["tie"] is True
    table = (tmp_path / "out" / "compare.md").read_text()
    assert "| sigmoid | 1,234 | 20 | 4.3168 ± 0.0058 | tie |" in table
    assert "-0.0003: tie" in table
    # with a small enough standard error the same difference is a result
    assert difference(2.9922, 1e-5, 2.9924, 1e-5)["tie"] is False


def test_runs_without_standard_errors_are_said_to_have_none(tmp_path: Path) -> None:
    runs = [_run(tmp_path / "a", [2.0, 1.5], se=None), _run(tmp_path / "b", [1.8, 1.4], se=None)]
    rows = compare_runs(runs, tmp_path / "out")["rows"]
    assert rows[1]["target"] == "reached" and rows[1]["final_valid_vs_baseline"]["tie"] is None
    assert "(no standard error recorded)" in (tmp_path / "out" / "compare.md").read_text()


def test_a_run_that_did_not_learn_is_named_with_its_baseline(tmp_path: Path) -> None:
    trivial = {"unigram": 3.0}
    plateau = _run(tmp_path / "plateau", [3.01, 2.999], trivial=trivial)
    learned = _run(tmp_path / "learned", [2.5, 2.0], trivial=trivial)
    rows = compare_runs([plateau, learned], tmp_path / "out")["rows"]
    assert rows[0]["learned"]["learned"] is False and rows[1]["learned"]["learned"] is True
    assert rows[0]["warning"].startswith("warning: plateau did not learn beyond the trivial")
    assert "unigram model's 4.3281" in rows[0]["warning"] and rows[1]["warning"] is None
    table = (tmp_path / "out" / "compare.md").read_text()
    assert "- warning: plateau did not learn" in table and "learned did not" not in table
    # the hint names this run's settings: it set no model.init, so PyTorch's default is named
    assert (
        "try more steps (train.max_steps) or a recipe known to learn the lm task"
        in (rows[0]["warning"])
    )
    assert "model.init=torch (this run used model.init=uniform)" in rows[0]["warning"]
    # the run's comparison with a baseline that learned nothing is withheld, said first
    assert rows[1]["target"] == "withheld" and rows[1]["steps_to_target"] is None
    withheld = (
        "withheld: plateau (4.3266 bits per character) did not beat the unigram model (4.3281)"
    )
    assert rows[1]["withheld"].startswith(withheld) and rows[0]["withheld"] is None
    assert f"| {withheld}" in table
    assert table.index("- warning: plateau") < table.index("| run | params |")


def test_another_baseline_sets_the_target(tmp_path: Path) -> None:
    runs = [_run(tmp_path / "a", [2.0, 1.5]), _run(tmp_path / "b", [1.8, 1.0])]
    summary = compare_runs(runs, tmp_path / "out", baseline="b", title="Mine")
    assert summary["target_valid_loss"] == 1.0
    assert [r["steps_to_target"] for r in summary["rows"]] == [None, 20]
    assert (tmp_path / "out" / "compare.md").read_text().startswith("# Mine\n")


def test_runs_that_share_a_name_are_labelled_by_the_fewest_path_parts(tmp_path: Path) -> None:
    """Short labels (the legends and the table): the trailing parts that tell runs apart, not
    the whole paths."""
    dirs = [tmp_path / "x" / "run", tmp_path / "y" / "run"]
    assert run_labels(dirs) == ["x/run", "y/run"]
    assert run_labels([tmp_path / "a", tmp_path / "b"]) == ["a", "b"]
    deep = [tmp_path / "a" / "s1" / "run", tmp_path / "b" / "s1" / "run", tmp_path / "c"]
    assert run_labels(deep) == ["a/s1/run", "b/s1/run", "c"]


def test_folders_that_cannot_be_compared_are_one_line_errors(tmp_path: Path) -> None:
    good = _run(tmp_path / "good", [2.0, 1.5])
    with pytest.raises(DataError, match="named twice"):
        compare_runs([good, good], tmp_path / "out")
    with pytest.raises(DataError, match=r"^--baseline 'other' is not one of the runs: good$"):
        compare_runs([good], tmp_path / "out", baseline="other")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no validation records in metrics.jsonl"):
        load_compared(tmp_path / "empty", "empty")
    other = _run(tmp_path / "other", [2.0, 1.5], data={"corpus": "ptb-char"})
    with pytest.raises(DataError, match=r"different tasks or data \(data.corpus='ptb-char'"):
        compare_runs([good, other], tmp_path / "out")


def _write_plain_metrics(folder: Path, valid: list[float]) -> None:
    folder.mkdir(parents=True)
    records = []
    for i, loss in enumerate(valid, start=1):
        records.append({"step": 10 * i, "split": "train", "loss": loss + 0.1})
        records.append({"step": 10 * i, "split": "valid", "loss": loss})
    text = "".join(json.dumps(r) + "\n" for r in records)
    (folder / "metrics.jsonl").write_text(text, encoding="utf-8")


def test_the_single_seed_comparison_on_synthetic_metrics(tmp_path: Path) -> None:
    """The page of ``benchmarks/curve_xl_variants.py``: the comparison with each model's
    sample last."""
    curves = {
        "plain": [2.0, 1.5, 1.2, 1.1],
        "sdu-sigmoid": [1.8, 1.1, 1.0, 0.9],
        "sdu-tanh": [2.2, 1.9, 1.7, 1.6],
    }
    for variant, losses in curves.items():
        _write_plain_metrics(tmp_path / variant, losses)
        results = {
            "parameters": 1000,
            "valid": {"bpc": losses[-1] / 0.693},
            "test": {"bpc": losses[-1] / 0.69},
        }
        (tmp_path / variant / "results.json").write_text(json.dumps(results), encoding="utf-8")
    samples = {v: f"The {v} sample" for v in curves}
    summary = compare_runs([tmp_path / v for v in curves], tmp_path, samples=samples)
    rows = {r["run"]: r for r in summary["rows"]}
    assert summary["target_valid_loss"] == 1.1
    assert rows["plain"]["steps_to_target"] == 40
    assert rows["sdu-sigmoid"]["steps_to_target"] == 20  # 1.1 <= 1.1 at step 20
    assert rows["sdu-tanh"]["steps_to_target"] is None
    report = (tmp_path / "compare.md").read_text(encoding="utf-8")
    assert "| sdu-tanh | 1,000 |" in report and "not reached" in report
    assert report.rstrip().endswith("The sdu-tanh sample\n```")
    assert Path(summary["plot"]).is_file()
    assert summary["samples"] == samples
