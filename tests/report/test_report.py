"""The experiment report from hand-written run folders, and the gate-bias analysis."""

from __future__ import annotations

import json
import math
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.experiments import run_experiments
from highway_transformer.report.report import write_report

MakeRun = Callable[..., Path]


@pytest.fixture
def table1(tmp_path: Path, make_run: MakeRun) -> Path:
    """Baseline, σ-SDU (two seeds) and tanh-SDU rows of HT Table 1, by hand."""
    root = tmp_path / "runs"
    make_run(root, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 100.0)
    make_run(root, "ht-table1/t-l3+sigmoid", [1.8, 1.3, 1.1, 1.0], 1.4, 1.3, 110.0, seed=1)
    make_run(root, "ht-table1/t-l3+sigmoid", [1.8, 1.3, 1.1, 1.0], 1.6, 1.5, 110.0, seed=2)
    make_run(root, "ht-table1/t-l3+tanh", [2.1, 1.6, 1.3, 1.2], 1.7, 1.45, 90.0)
    return root


def test_paper_table_marks_and_percentages(table1: Path, tmp_path: Path) -> None:
    report = write_report([table1], tmp_path / "report")
    rows = {r["name"]: r for r in report["paper_table"]}
    sigmoid, tanh = rows["ht-table1/t-l3+sigmoid"], rows["ht-table1/t-l3+tanh"]
    # σ ran seeds 1 and 2, the baseline seed 1 only: its mean is over its own seeds,
    # (1.4 + 1.6) / 2 = 1.5, but Δ compares the seed both ran: eval 1.4 vs 1.6 -> -12.5 %;
    # test 1.3 vs 1.5 -> -13.33 %.
    assert sigmoid["eval_bpc"]["mean"] == pytest.approx(1.5)
    assert sigmoid["eval_bpc"]["std"] == pytest.approx(math.sqrt(0.02))
    assert sigmoid["eval_bpc_change_pct"] == pytest.approx(-12.5)
    assert sigmoid["test_bpc_change_pct"] == pytest.approx(-200 / 15)
    assert sigmoid["eval_bpc_improved"] and sigmoid["test_bpc_improved"]
    # tanh: eval 1.7 vs 1.6 -> +6.25 % (worse); test 1.45 vs 1.5 -> -3.33 %.
    assert tanh["eval_bpc_change_pct"] == pytest.approx(6.25)
    assert tanh["eval_bpc_improved"] is False and tanh["test_bpc_improved"] is True
    # the published change: 1.371 vs 1.495.
    assert sigmoid["published_test_bpc_change_pct"] == pytest.approx((1.371 / 1.495 - 1) * 100)
    assert rows["ht-table1/t-l3"]["eval_bpc_change_pct"] is None

    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "| ht-table1/t-l3+sigmoid | 2 | 1,000 |" in index
    assert "1.5000 ± 0.1414 ⇓ | -12.50% ⇓ |" in index
    assert (
        "**The rows ran different seeds** (ht-table1/t-l3 1; ht-table1/t-l3+sigmoid 1, 2; "
        "ht-table1/t-l3+tanh 1): Δ in the results table compares each row with its baseline on "
        "the seeds both ran" in index
    )
    assert "| 1.7000 | +6.25% |" in index
    assert "| 1.4500 ⇓ | -3.33% ⇓ |" in index
    assert "| 1.5410 | 1.4950 | baseline | baseline |" in index


def test_acceleration_and_time_tables(table1: Path, tmp_path: Path) -> None:
    report = write_report([table1], tmp_path / "report")
    valid = report["acceleration"]["valid"]
    # the baseline's best validation loss 1.1 is first reached at its step 40;
    # σ reaches it at step 30 (30/40 of 110 s = 82.5 s); tanh (best 1.2) never does.
    assert valid["target_loss"] == pytest.approx(1.1) and valid["baseline_steps"] == 40
    rows = {r["name"]: r for r in valid["rows"]}
    assert rows["ht-table1/t-l3+sigmoid"]["steps_to_target"] == 30
    assert rows["ht-table1/t-l3+sigmoid"]["seconds_to_target"] == pytest.approx(82.5)
    assert rows["ht-table1/t-l3+sigmoid"]["ratio_to_baseline_steps"] == pytest.approx(0.75)
    assert rows["ht-table1/t-l3+tanh"]["steps_to_target"] is None
    assert report["acceleration"]["train"]["target_loss"] == pytest.approx(1.2)
    times = {r["name"]: r for r in report["time"]}
    assert times["ht-table1/t-l3+sigmoid"]["time_change_pct"] == pytest.approx(10.0)
    assert times["ht-table1/t-l3+tanh"]["time_change_pct"] == pytest.approx(-10.0)
    assert times["ht-table1/t-l3"]["seconds_per_step"]["mean"] == pytest.approx(2.5)
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "| ht-table1/t-l3+sigmoid | 1.0000 | 30 | 82.5 | 0.750 |" in index
    assert "| ht-table1/t-l3+tanh | 1.2000 | not reached | — | — |" in index
    assert report["missing"] == [] and "Nothing is missing." in index


def test_paper_direction_row_by_row(table1: Path, tmp_path: Path) -> None:
    report = write_report([table1], tmp_path / "report")
    rows = {r["name"]: r for r in report["direction"]}
    sigmoid, tanh = rows["ht-table1/t-l3+sigmoid"], rows["ht-table1/t-l3+tanh"]
    # σ reaches the baseline's best (1.1, its step 40) at step 30; ends at 1.4 vs 1.6 bpc
    # on the seed both ran;
    # only seed 1 ran for both rows (1.4 < 1.6); the paper has σ lower too (1.41 < 1.541).
    assert sigmoid["steps_to_baseline_best"] == 30 and sigmoid["baseline_steps"] == 40
    assert sigmoid["converges_faster"] is True and sigmoid["better_at_equal_steps"] is True
    assert (sigmoid["seeds_better"], sigmoid["seeds_paired"]) == (1, 1)
    assert sigmoid["same_sign_as_paper"] is True
    # in time: 30/40 of σ's 110 s = 82.5 s against the baseline's 100 s at its step 40.
    assert sigmoid["seconds_to_baseline_best"] == pytest.approx(82.5)
    assert sigmoid["baseline_seconds"] == pytest.approx(100.0)
    assert sigmoid["converges_sooner_in_time"] is True
    # tanh never reaches 1.1 and ends higher (1.7), while the paper has it lower (1.401).
    assert tanh["converges_faster"] is False and tanh["better_at_equal_steps"] is False
    assert tanh["converges_sooner_in_time"] is False
    assert (tanh["seeds_better"], tanh["seeds_paired"]) == (0, 1)
    assert tanh["paper_better"] is True and tanh["same_sign_as_paper"] is False
    assert "ht-table1/t-l3" not in rows
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert (
        "1 of 2 rows reached the baseline's best validation loss in fewer steps than the "
        "baseline (1 of 2 also in less training time); 1 of 2 ended with a lower validation "
        "bpc at equal steps; 1 of 2 changed in the direction the paper published." in index
    )
    assert (
        "| ht-table1/t-l3+sigmoid | 30 (40) | yes | 82.5 (100.0) | yes | -12.50% ⇓ "
        "| yes (one seed) | 1/1 | -8.50% ⇓ | yes (one seed) |" in index
    )  # one seed decides: said, since a tie within seed noise reads "yes" as readily
    assert (
        "| ht-table1/t-l3+tanh | not reached (40) | no | — (100.0) | no | +6.25% "
        "| no (one seed) | 0/1 |" in index
    )


def test_figures_are_written(table1: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = write_report([table1], out)
    assert {"convergence_steps", "convergence_time"} <= set(report["figures"])
    files = [name for names in report["figures"].values() for name in names]
    assert {Path(f).suffix for f in files} == {".svg"}
    for name in files:
        assert (out / name).stat().st_size > 1000
    saved = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert saved["figures"] == report["figures"] and saved["table"] == "ht-table1"
    index = (out / "index.md").read_text(encoding="utf-8")
    assert "## Convergence (HT Figure 4 at this scale)" in index  # the paper's curves


def test_table7_hours_beside_table5_runs(tmp_path: Path, make_run: MakeRun) -> None:
    root = tmp_path / "runs"
    make_run(root, "ht-table5/l6-xl", [2.0, 1.5, 1.2, 1.1], 1.3, 1.25, 100.0)
    make_run(root, "ht-table5/l6-xl+tanh", [2.0, 1.4, 1.15, 1.05], 1.25, 1.2, 101.0)
    report = write_report([root], tmp_path / "report")
    times = {r["name"]: r for r in report["time"]}
    tanh = times["ht-table5/l6-xl+tanh"]
    assert tanh["published_train_hours"] == 21.45
    assert tanh["published_time_change_pct"] == pytest.approx((21.45 / 21.16 - 1) * 100)
    assert report["also_in"] == ["ht-table7"]


def test_row_against_row_claims_are_paired_by_seed(tmp_path: Path, make_run: MakeRun) -> None:
    """HT Table 5's "gate the lower layers": L1-3 minus L3-6, seed by seed, against values
    worked by hand; a claim whose rows did not both run is left out."""
    root = tmp_path / "runs"
    curve = [2.0, 1.5, 1.2, 1.1]
    for seed, (low, high) in enumerate([(1.30, 1.20), (1.24, 1.22), (1.27, 1.24)], start=1):
        make_run(root, "ht-table5/l6-xl", curve, 1.40, 1.35, 100.0, seed=seed)
        make_run(root, "ht-table5/l6-xl+tanh-l1-3", curve, low, low - 0.04, 100.0, seed=seed)
        make_run(root, "ht-table5/l6-xl+tanh-l3-6", curve, high, high - 0.04, 100.0, seed=seed)
    report = write_report([root], tmp_path / "report")
    (claim,) = report["contrasts"]  # the σ and \FFN claims lack a row here
    assert claim["row"] == "ht-table5/l6-xl+tanh-l1-3"
    assert claim["other"] == "ht-table5/l6-xl+tanh-l3-6"
    paired = claim["eval_bpc_paired"]
    diffs = [0.10, 0.02, 0.03]
    assert list(paired["per_seed"].values()) == pytest.approx(diffs)
    mean, sem = 0.05, math.sqrt(((0.05**2) + 0.03**2 + 0.02**2) / 2) / math.sqrt(3)
    half = 4.302652729911275 * sem  # Student t, 2 degrees of freedom, 97.5%
    assert paired["mean"] == pytest.approx(mean)
    assert paired["interval"] == pytest.approx([mean - half, mean + half])
    assert paired["verdict"] == "unresolved"
    assert claim["published_eval_bpc_difference"] == pytest.approx(1.249 - 1.277)
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "| tanh: gate the lower layers (L1-3 below L3-6) | ht-table5/l6-xl+tanh-l1-3 |" in index
    assert "s1 +0.1000, s2 +0.0200, s3 +0.0300" in index


def test_missing_and_truncated_metrics_are_listed(table1: Path, tmp_path: Path) -> None:
    tanh = table1 / "ht-table1" / "small" / "t-l3+tanh" / "seed1"
    (tanh / "metrics.jsonl").unlink()
    sigmoid = table1 / "ht-table1" / "small" / "t-l3+sigmoid" / "seed2"
    lines = (sigmoid / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    (sigmoid / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])
    (sigmoid / "results.json").unlink()
    report = write_report([table1], tmp_path / "report", allow_mixed_code=True)
    missing = report["missing"]
    assert "ht-table1/t-l3+tanh seed 1: metrics.jsonl missing: no curves" in missing
    assert any("seed 2: metrics.jsonl: its last line is cut short" in m for m in missing)
    assert any("seed 2: results.json missing" in m for m in missing)
    assert not any("seed 2: metrics.jsonl stops" in m for m in missing)  # step 40 train logged
    rows = {r["name"]: r for r in report["paper_table"]}
    assert rows["ht-table1/t-l3+sigmoid"]["eval_bpc"]["n"] == 1  # what is there is reported
    assert rows["ht-table1/t-l3+tanh"]["test_bpc"]["mean"] == pytest.approx(1.45)
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "- ht-table1/t-l3+tanh seed 1: metrics.jsonl missing: no curves" in index


def test_metrics_stopping_early_are_reported(table1: Path, tmp_path: Path) -> None:
    run = table1 / "ht-table1" / "small" / "t-l3" / "seed1"
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    report = write_report([run], tmp_path / "report")
    assert report["missing"] == ["ht-table1/t-l3 seed 1: metrics.jsonl stops at step 20 of 40"]


def test_runs_still_training_are_left_out_and_listed(table1: Path, tmp_path: Path) -> None:
    """A run without results.json whose metrics stop short of max_steps is training (or
    interrupted): it is no result, so no number or curve includes it."""
    run = table1 / "ht-table1" / "small" / "t-l3+sigmoid" / "seed2"
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    (run / "results.json").unlink()
    report = write_report([table1], tmp_path / "report")
    rows = {r["name"]: r for r in report["paper_table"]}
    assert rows["ht-table1/t-l3+sigmoid"]["eval_bpc"]["n"] == 1
    assert rows["ht-table1/t-l3+sigmoid"]["eval_bpc"]["mean"] == pytest.approx(1.4)
    assert report["in_progress"] == [
        {"name": "ht-table1/t-l3+sigmoid", "seed": 2, "step": 20, "max_steps": 40}
    ]
    assert report["missing"] == [] and len(report["runs"]) == 3
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "left out of every number and figure below:** ht-table1/t-l3+sigmoid seed 2 " in index


def test_a_run_with_nan_is_flagged_first_and_left_out_of_every_number(
    table1: Path, tmp_path: Path
) -> None:
    run = table1 / "ht-table1" / "small" / "t-l3+sigmoid" / "seed2"
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    results["valid"]["bpc"] = math.nan  # json writes NaN, as a damaged record holds it
    (run / "results.json").write_text(json.dumps(results), encoding="utf-8")
    report = write_report([table1], tmp_path / "report", allow_mixed_code=True)
    reason = f"{run / 'results.json'}: valid.bpc is NaN"
    assert report["unusable"] == [{"name": "ht-table1/t-l3+sigmoid", "seed": 2, "reason": reason}]
    assert len(report["runs"]) == 3  # of 4: the NaN run is in no statistic
    rows = {r["name"]: r for r in report["paper_table"]}
    assert rows["ht-table1/t-l3+sigmoid"]["eval_bpc"]["n"] == 1
    assert rows["ht-table1/t-l3+sigmoid"]["eval_bpc"]["mean"] == pytest.approx(1.4)
    assert report["missing"] == [f"ht-table1/t-l3+sigmoid seed 2: not usable, {reason}"]
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    flagged = index.index("**Not usable, left out of every number and figure below:**")
    assert flagged < index.index("## Results") and reason in index
    assert "Nothing is missing" not in index


def test_a_table_whose_runs_all_diverged_is_refused(table1: Path, tmp_path: Path) -> None:
    run = table1 / "ht-table1" / "small" / "t-l3" / "seed1"
    (run / "results.json").unlink()  # a diverged run writes no results, its last record NaN
    with (run / "metrics.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 50, "split": "valid", "loss": math.inf}) + "\n")
    with pytest.raises(ConfigError, match="none of the 1 runs is usable: .*loss is Infinity at st"):
        write_report([run], tmp_path / "report")
    assert not (tmp_path / "report").exists()


def test_a_table_with_no_finished_run_is_refused(table1: Path, tmp_path: Path) -> None:
    run = table1 / "ht-table1" / "small" / "t-l3" / "seed1"
    (run / "results.json").unlink()
    lines = [json.dumps({"step": 10, "split": "valid", "loss": 2.0, "bpc": 2.9, "time": 1.0})]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="none of the 1 runs has finished yet .* 10"):
        write_report([run], tmp_path / "report")


def test_mixing_tables_or_scales_is_refused(
    table1: Path, tmp_path: Path, make_run: MakeRun
) -> None:
    make_run(table1, "ht-table3/t-l3", [5.0, 4.9, 4.8, 4.7], 7.0, 7.0, 10.0)
    with pytest.raises(ConfigError, match=r"mix tables: ht-table1 \(4 runs\), ht-table3 \(1 run\)"):
        write_report([table1], tmp_path / "report")
    other = tmp_path / "other"
    make_run(other, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 100.0, scale="tiny")
    with pytest.raises(ConfigError, match="mix scales: small .*tiny"):
        write_report([table1 / "ht-table1", other], tmp_path / "report")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="holds no experiment.json"):
        write_report([empty], tmp_path / "report")


def test_runs_with_other_overrides_are_refused_or_named(tmp_path: Path, make_run: MakeRun) -> None:
    root = tmp_path / "runs"
    longer = ["train.max_steps=80"]
    make_run(root, "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 100.0, overrides=longer)
    make_run(root, "ht-table1/t-l3+tanh", [2.1, 1.6, 1.3, 1.2], 1.7, 1.45, 90.0, overrides=[])
    with pytest.raises(ConfigError, match="mix overrides: .*write one report per table, scale"):
        write_report([root], tmp_path / "report")
    make_run(
        root, "ht-table1/t-l3+sigmoid", [2.1, 1.6, 1.3, 1.2], 1.7, 1.45, 90.0, overrides=longer
    )
    runs = root / "ht-table1" / "small"
    report = write_report([runs / "t-l3", runs / "t-l3+sigmoid"], tmp_path / "report")
    assert report["overrides"] == longer
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "Overrides on top of the scale: `train.max_steps=80`." in index
    assert "other data than the paper's" not in index


def test_runs_on_other_data_say_the_paper_columns_are_not_comparable(
    tmp_path: Path, make_run: MakeRun
) -> None:
    root = tmp_path / "runs"
    other = ["data.corpus=ptb-char", "train.max_steps=80"]
    make_run(root, "ht-table5/l6-xl", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 100.0, overrides=other)
    make_run(root, "ht-table5/l6-xl+sigmoid", [2.0, 1.4, 1.1, 1.0], 1.5, 1.4, 90.0, overrides=other)
    write_report([root], tmp_path / "report")
    index = (tmp_path / "report" / "index.md").read_text(encoding="utf-8")
    assert "**These runs read other data than the paper's** (`data.corpus=ptb-char`)" in index


def test_gate_biases_of_a_tiny_trained_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "corpus.txt"
    rng = random.Random(1)
    text.write_text("".join(rng.choice("abcde fgh\n") for _ in range(6000)), encoding="utf-8")
    overrides = ["data.corpus=file", f"data.path={text}", "data.level=char",
                 "train.max_steps=4", "train.eval_interval=2"]  # fmt: skip
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+tanh"]
    dirs = run_experiments(rows, tmp_path / "runs", "tiny", overrides=overrides)
    out = tmp_path / "report"
    report = write_report(dirs, out)
    gates = report["gates"]
    assert list(gates["heatmaps"]) == ["ht-table1/t-l3+tanh"]  # the baseline has no gates
    points = gates["pca"]["points"]
    assert len(points) == 6  # 3 layers x (attn, ffn)
    assert {(p["layer"], p["sublayer"]) for p in points} == {
        (layer, kind) for layer in (1, 2, 3) for kind in ("attn", "ffn")
    }
    assert all(math.isfinite(p["x"]) and math.isfinite(p["y"]) for p in points)
    for name in gates["pca"]["figure"] + gates["heatmaps"]["ht-table1/t-l3+tanh"]:
        assert (out / name).stat().st_size > 1000
    assert report["missing"] == []
    # results.json holds the best weights' b1, so a run folder without weights reports them.
    from highway_transformer.api import load_pretrained

    tanh = dirs[1]
    model, _, _ = load_pretrained(tanh / "best")
    recorded = json.loads((tanh / "results.json").read_text(encoding="utf-8"))["gate_biases"]
    assert recorded.keys() == model.gate_biases().keys()
    for name, bias in model.gate_biases().items():
        assert recorded[name] == bias.detach().float().ravel().tolist()
    for run in dirs:
        shutil.rmtree(run / "best")
        shutil.rmtree(run / "checkpoint")
    again = write_report(dirs, tmp_path / "again")
    assert again["gates"]["pca"]["points"] == points and again["missing"] == []
    assert again["baselines"] is None  # not asked for

    # The lines to beat: the task's trivial models on the data the runs read.
    from highway_transformer import cli

    lines = write_report(dirs, tmp_path / "lines", baselines=True)["baselines"]["models"]
    # the data as the runs read it: the tiny scale's caps on the splits
    same_data = ["data.corpus=file", f"data.path={text}", "data.level=char",
                 "data.max_train_tokens=20000", "data.max_eval_tokens=2000"]  # fmt: skip
    assert cli.main(["baselines", "--json", *same_data]) == 0
    assert lines == json.loads(capsys.readouterr().out)["baselines"]
    assert set(lines) == {"unigram", "bigram", "trigram"}
    index = (tmp_path / "lines" / "index.md").read_text(encoding="utf-8")
    trigram = lines["trigram"]["valid"]["bpc"]
    assert "## Lines to beat" in index and f"| trigram | {trigram:.4f} |" in index
    gone = write_report(dirs, tmp_path / "gone", baselines=True, data_path=str(tmp_path / "no"))
    assert "not_computed" in gone["baselines"]
    assert "Trivial baselines not computed:" in (tmp_path / "gone" / "index.md").read_text()
    assert cli.main(["report", str(tmp_path / "runs"), "--data-path", str(text)]) == 2
    assert "pass --baselines too" in capsys.readouterr().err


def test_results_readme_snippet_adds_gate_biases_to_older_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maintenance snippet of results/README.md, run as written on a run folder whose
    results.json predates the recorded gate biases."""
    import re

    text = tmp_path / "corpus.txt"
    text.write_text("abcde fgh\n" * 600, encoding="utf-8")
    overrides = ["data.corpus=file", f"data.path={text}", "data.level=char",
                 "train.max_steps=2", "train.eval_interval=2"]  # fmt: skip
    (run,) = run_experiments("ht-table1/t-l3+tanh", tmp_path / "results", "tiny",
                             overrides=overrides)  # fmt: skip
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    recorded = results.pop("gate_biases")
    (run / "results.json").write_text(json.dumps(results), encoding="utf-8")
    readme = (Path(__file__).resolve().parents[2] / "results" / "README.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "results/README.md", "exec"), {"__name__": "snippet"})
    restored = json.loads((run / "results.json").read_text(encoding="utf-8"))["gate_biases"]
    assert restored == recorded


def _trained_on(run_dir: Path, *capabilities: str) -> None:
    """Record in results.json that the run trained in one stretch per capability given."""
    path = run_dir / "results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    results["stretches"] = [
        {"from_step": 20 * i, "to_step": 20 * (i + 1), "seconds": 1.0, "host": f"h{i}",
         "device": "cpu", "cpu_capability": cap, "threads": 1, "torch": "2.13.0"}
        for i, cap in enumerate(capabilities)
    ]  # fmt: skip
    path.write_text(json.dumps(results), encoding="utf-8")


def test_seconds_compare_only_runs_of_one_kind_of_machine(table1: Path, tmp_path: Path) -> None:
    runs = sorted(p.parent for p in table1.rglob("results.json"))
    for run_dir in runs:  # other hosts, the same kind of machine: time compares
        _trained_on(run_dir, "AVX2")
    report = write_report([table1], tmp_path / "same", allow_mixed_code=True)
    assert report["machines"]["time_comparable"] is True
    assert len(report["machines"]["runs_by_machine"]) == 1
    accel = {r["name"]: r for r in report["acceleration"]["valid"]["rows"]}
    assert accel["ht-table1/t-l3+sigmoid"]["seconds_to_target"] == pytest.approx(82.5)
    assert "not compared" not in (tmp_path / "same" / "index.md").read_text(encoding="utf-8")

    # the σ seed-2 run resumed on an AVX512 CPU: seconds no longer compare across rows
    sigmoid2 = next(p for p in runs if "sigmoid" in str(p) and p.name == "seed2")
    _trained_on(sigmoid2, "AVX2", "AVX512")
    report = write_report([table1], tmp_path / "mixed", allow_mixed_code=True)
    machines = report["machines"]
    assert machines["time_comparable"] is False
    by_machine = machines["runs_by_machine"]
    assert by_machine["cpu_capability AVX512"] == ["ht-table1/t-l3+sigmoid seed 2"]
    assert machines["common"] == "device cpu, threads 1, torch 2.13.0"
    accel = {r["name"]: r for r in report["acceleration"]["valid"]["rows"]}
    assert accel["ht-table1/t-l3+sigmoid"]["steps_to_target"] == 30  # steps still compare
    assert all(r["seconds_to_target"] is None for r in accel.values())
    direction = {r["name"]: r for r in report["direction"]}
    assert direction["ht-table1/t-l3+sigmoid"]["converges_sooner_in_time"] is None
    assert direction["ht-table1/t-l3+sigmoid"]["converges_faster"] is True
    times = {r["name"]: r for r in report["time"]}
    assert times["ht-table1/t-l3+sigmoid"]["time_change_pct"] is None
    assert times["ht-table1/t-l3"]["seconds_per_step"]["mean"] == pytest.approx(2.5)
    # a row whose own seeds trained on two kinds of machine has no mean seconds at all
    assert times["ht-table1/t-l3+sigmoid"]["seconds_per_step"] is None
    assert times["ht-table1/t-l3+sigmoid"]["train_hours"] is None
    index = (tmp_path / "mixed" / "index.md").read_text(encoding="utf-8")
    assert "**Training time is not compared: the runs trained on 2 kinds of machine**" in index
    assert "in fewer steps than the baseline (training time not compared);" in index
    assert "| ht-table1/t-l3+sigmoid | 30 (40) | yes | — (—) | — |" in index
    assert report["figures"]["convergence_time"] == [] and "convergence vs time" not in index
    assert (tmp_path / "same" / "convergence_time.svg").is_file()
    # rewritten untimed: no stale figure
    report = write_report([table1], tmp_path / "same", allow_mixed_code=True)
    assert not list((tmp_path / "same").glob("convergence_time.*"))


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
    report = write_report([tmp_path / "runs"], tmp_path / "report", allow_mixed_code=True)
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
