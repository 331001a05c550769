"""The demo (the named A/B ``DEMO``): its front page from hand-written run folders of its A/B
(the values of each seed, the paired intervals and verdicts checked against a hand
computation), one seed, and the rows and their configs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from highway_transformer import cli
from highway_transformer.config import Config, GateConfig, save_config
from highway_transformer.experiments.named import DEMO, default_jobs, plan_named, row_config
from highway_transformer.experiments.plan import write_experiment_file
from highway_transformer.report.ab_summary import write_ab_page
from highway_transformer.report.report import write_report
from highway_transformer.runtime.provenance import code_facts
from highway_transformer.validation import validate

LN2 = math.log(2)
#: Each model's valid bpc at its last checkpoint, seeds 1, 2, 3 (hand-picked: the paired
#: differences to plain are σ +0.05, -0.05, +0.03 and tanh -0.10, -0.08, -0.12).
FINAL = {
    "plain": [2.00, 2.10, 2.05],
    "sdu-sigmoid": [2.05, 2.05, 2.08],
    "sdu-tanh": [1.90, 2.02, 1.93],
}
#: Student's t, 97.5% quantile, 2 degrees of freedom (printed tables: 4.303).
T_975_2 = 4.302652729911275


def _gate(row: str) -> GateConfig:
    """The gate a row of the demo declares."""
    return Config().replace(**DEMO.rows[row]).model.gate


def _demo_runs(out: Path, seeds: int = 3) -> list[Path]:
    """The demo's A/B planned (40 steps) and its run folders written by hand, each with its
    frozen comparison and the bpc of :data:`FINAL` as its last checkpoint's whole-split score."""
    plan = plan_named(DEMO, out, steps=40, seeds=seeds)
    for spec in plan.specs:
        write_experiment_file(spec)
        save_config(spec.config, spec.run_dir / "config.yaml")
        bpc = FINAL[spec.experiment.row][spec.seed - 1]
        records = [
            {"step": step, "split": split, "loss": (bpc + 0.1 * (4 - i)) * LN2 + extra,
             "bpc": bpc + 0.1 * (4 - i) + extra / LN2, "time": float(step)}
            for i, step in enumerate((10, 20, 30, 40), start=1)
            for split, extra in (("train", 0.05), ("valid", 0.0))
        ]  # fmt: skip
        text = "".join(json.dumps(r) + "\n" for r in records)
        (spec.run_dir / "metrics.jsonl").write_text(text, encoding="utf-8")
        figures = {"loss": bpc * LN2, "bpc": bpc}
        results = {"steps": 40, "train_seconds": 40.0, "parameters": 1000, "valid": figures,
                   "test": figures, "final": {"step": 40, "valid": figures, "test": figures},
                   "metadata": dict(code_facts()), "gate_biases": {}}  # fmt: skip
        (spec.run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return [spec.run_dir for spec in plan.specs]


def test_the_demo_report_gives_each_seed_and_the_paired_intervals(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    report = write_report(_demo_runs(out), out / "report")
    trivial = {"unigram": 4.5, "bigram": 3.25, "trigram": 2.0}
    report["baselines"] = {"models": {m: {"valid": {"bpc": v}} for m, v in trivial.items()}}
    samples = {v: f"The {v} sample" for v in DEMO.rows}
    summary = write_ab_page(out, report, DEMO, 40, samples)

    rows = {r["row"]: r for r in summary["primary"]["rows"]}
    assert list(rows) == ["ab/sdu-sigmoid", "ab/sdu-tanh"]
    assert summary["primary"]["status"] == "pre-registered"
    # by hand: mean of the differences, sd, half-width t(0.975, 2) * sd / sqrt(3)
    expected = {
        "ab/sdu-sigmoid": (0.01, math.sqrt((0.04**2 + 0.06**2 + 0.02**2) / 2)),
        "ab/sdu-tanh": (-0.10, 0.02),
    }
    for name, (mean, sd) in expected.items():
        paired = rows[name]["paired"]
        half = T_975_2 * sd / math.sqrt(3)
        assert rows[name]["against_per_seed"] == dict(zip("123", FINAL["plain"], strict=True))
        assert rows[name]["row_per_seed"] == dict(zip("123", FINAL[name[3:]], strict=True))
        assert paired["mean"] == pytest.approx(mean) and paired["std"] == pytest.approx(sd)
        assert paired["interval"] == pytest.approx([mean - half, mean + half])
    assert rows["ab/sdu-sigmoid"]["verdict"] == "no detectable difference"  # [-0.1214, +0.1414]
    assert rows["ab/sdu-tanh"]["verdict"] == "better"  # [-0.1497, -0.0503]

    page = (out / "report.md").read_text(encoding="utf-8")
    assert "- sdu-tanh − plain: valid bpc −0.1000 [−0.1497, −0.0503] (3 seeds): better" in page
    assert ("- sdu-sigmoid − plain: valid bpc +0.0100 [−0.1214, +0.1414] (3 seeds): no "
            "detectable difference") in page  # fmt: skip
    assert ("- lines to beat (valid bpc of trivial models): unigram 4.5000, bigram 3.2500, "
            "trigram 2.0000") in page  # fmt: skip
    assert ("- mean over seeds beating the best trivial model (trigram 2.0000): sdu-tanh; "
            "not beating it: plain, sdu-sigmoid") in page  # fmt: skip
    assert (
        "| seed | plain | sdu-sigmoid | sdu-tanh | sdu-sigmoid − plain | sdu-tanh − plain |" in page
    )
    assert "| 1 | 2.0000 | 2.0500 | 1.9000 | +0.0500 | −0.1000 |" in page
    assert "| 2 | 2.1000 | 2.0500 | 2.0200 | −0.0500 | −0.0800 |" in page
    assert "| 3 | 2.0500 | 2.0800 | 1.9300 | +0.0300 | −0.1200 |" in page
    assert (
        "| mean [95% t-interval] | 2.0500 | 2.0600 | 1.9500 | +0.0100 [−0.1214, +0.1414] "
        "| −0.1000 [−0.1497, −0.0503] |"
    ) in page
    assert "one seed" not in page
    assert "![convergence, mean over seeds](report/convergence_steps.svg)" in page
    assert page.rstrip().endswith("The sdu-tanh sample\n```")
    assert Path(summary["plot"]).is_file()
    assert json.loads((out / "demo.json").read_text(encoding="utf-8")) == summary


def test_one_seed_says_there_is_no_interval(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    report = write_report(_demo_runs(out, seeds=1), out / "report")
    report["baselines"] = {"models": {"trigram": {"valid": {"bpc": 1.5}}}}
    write_ab_page(out, report, DEMO, 40)
    page = (out / "report.md").read_text(encoding="utf-8")
    assert "no model's mean beats the best trivial model (trigram 1.5000)" in page
    assert page.count("one seed: no interval and no verdict (give --seeds 2 or more") == 1
    assert "sdu-tanh − plain: valid bpc −0.1000 (1 seed): no verdict" in page
    assert "| mean [95% t-interval] | 2.0000 | 2.0500 | 1.9000 | +0.0500 | −0.1000 |" in page


@pytest.mark.parametrize("bad", [["--seeds", "0"], ["--steps", "0"], ["--jobs", "0"]])
def test_a_bad_budget_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: list[str]
) -> None:
    out = tmp_path / "demo"
    assert cli.main(["demo", "--out", str(out), *bad, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{bad[0]} must be >= 1, got 0" in err
    assert not out.exists()


def test_the_command_line_defaults_are_the_demos() -> None:
    args = cli.build_parser().parse_args(["demo"])
    assert (args.steps, args.seeds) == (DEMO.steps, DEMO.seeds) == (600, 3)
    assert default_jobs(9) >= 1 and default_jobs(1) == 1


def test_the_variants_differ_in_their_gate_alone() -> None:
    configs = {variant: row_config(DEMO, variant, steps=50) for variant in DEMO.rows}
    assert list(configs) == ["plain", "sdu-sigmoid", "sdu-tanh"]
    for variant, config in configs.items():
        validate(config)
        assert config.name == f"demo-{variant}" and config.model.gate == _gate(variant)
        assert config.train.max_steps == 50 and config.train.eval_interval == 5
        plain = configs["plain"].replace(**{"name": config.name})
        assert (
            config.replace(**{"model.gate.kind": "none", "model.gate.activation": "sigmoid"})
            == plain
        )
    assert row_config(DEMO, "plain", steps=5).train.eval_interval == 1  # at least every step


def test_the_tiny_demo_shrinks_every_model_alike_and_keeps_its_own_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    plan = plan_named(DEMO, out, steps=2, seeds=1, tiny=True)
    configs = {spec.experiment.row: spec.config for spec in plan.specs}
    assert list(configs) == list(DEMO.rows)
    for variant, config in configs.items():
        assert config.model.gate == _gate(variant)
        assert (config.model.d_model, config.model.n_layers) == (16, 3)
        assert config.data.max_train_tokens == 20_000 and config.train.max_steps == 2
    # a folder holding the tiny demo refuses the full one (and the other way round)
    argv = ["demo", "--out", str(out), "--steps", "2", "--seeds", "1", "--no-progress"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds the demo with another configuration" in err


def test_the_tiny_demo_says_so_first(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    report = write_report(_demo_runs(out, seeds=1), out / "report")
    summary = write_ab_page(out, report, DEMO, 40, tiny=True)
    page = (out / "report.md").read_text(encoding="utf-8")
    assert page.split("\n")[2] == DEMO.tiny_note and summary["tiny"] is True
