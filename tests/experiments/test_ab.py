"""A researcher's own A/B (``experiments/ab.py``): rows, the plan, its registered comparison
and the requests refused before anything trains. (Training and the report:
tests/test_cli_ab.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.config import Config, save_config
from highway_transformer.errors import ConfigError
from highway_transformer.experiments.ab import ab_comparison, parse_row, plan_ab


@pytest.fixture
def config_file(tmp_path: Path, text_file: Path, tiny_lm_config: Callable[..., Config]) -> Path:
    path = tmp_path / "tiny.yaml"
    save_config(tiny_lm_config(text_file), path)
    return path


def test_a_row_is_a_preset_a_config_file_or_overrides(config_file: Path) -> None:
    row = parse_row('tanh=ht-table1/t-l3 model.gate.kind=sdu "model.gate.activation=tanh"')
    assert (row.name, row.preset, row.config_file) == ("tanh", "ht-table1/t-l3", None)
    assert row.overrides == ("model.gate.kind=sdu", "model.gate.activation=tanh")
    row = parse_row(f"mine={config_file} train.lr=0.5")
    assert (row.preset, row.config_file, row.overrides) == ("", str(config_file), ("train.lr=0.5",))
    row = parse_row("default=model.d_model=64")  # the default config, as `highway train`
    assert (row.preset, row.config_file, row.overrides) == ("", None, ("model.d_model=64",))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ht-table1/t-l3", "give NAME=SPEC"),
        ("plain=", "give NAME=SPEC"),
        ("a/b=ht-table1/t-l3", "names its folder"),
        ("plain=ht-tabel1/t-l3", "closest preset is 'ht-table1/t-l3'"),
        ("plain=ht-table1/t-l3 tanh", "'tanh' is not a key=value override"),
    ],
)
def test_a_malformed_row_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_row(text)


def test_the_plan_pairs_every_row_seed_by_seed(tmp_path: Path, config_file: Path) -> None:
    rows = [f"plain={config_file} model.gate.kind=none", f"sdu={config_file}"]
    plan = plan_ab(rows, tmp_path, seeds=2)
    assert [(s.experiment.name, s.seed, s.config.train.seed) for s in plan.specs] == [
        ("ab/plain", 1, 7), ("ab/sdu", 1, 7), ("ab/plain", 2, 8), ("ab/sdu", 2, 8),
    ]  # fmt: skip
    assert plan.specs[1].run_dir == tmp_path / "ab" / "none" / "sdu" / "seed1"
    assert [s.config.model.gate.kind for s in plan.specs[:2]] == ["none", "sdu"]
    assert plan.metric == "bpc" and plan.specs[0].experiment.is_baseline
    assert plan.comparison == ab_comparison(plan.experiments, "bpc")
    (pair,) = plan.comparison.pairs
    assert (pair.row, pair.against, pair.claim) == ("ab/sdu", "ab/plain", "sdu against plain")
    c = plan.comparison
    assert (c.table, c.split, c.checkpoint, c.step, c.confidence) == (
        "ab", "valid", "last", "end", 0.95,
    )  # fmt: skip
    assert all(s.comparison is plan.comparison for s in plan.specs)


def test_the_metric_is_the_tasks(tmp_path: Path, config_file: Path) -> None:
    words = [f"a={config_file} data.level=word", f"b={config_file} data.level=word train.lr=1"]
    assert plan_ab(words, tmp_path).metric == "ppl"
    copy = ["a=copy/transformer", "b=copy/transformer model.gate.kind=sdu"]
    assert plan_ab(copy, tmp_path, "tiny").metric == "accuracy"


def test_rows_that_would_not_compare_are_refused(tmp_path: Path, config_file: Path) -> None:
    base = f"plain={config_file}"
    cases = {
        "at least one variant": [base],
        "given twice": [base, f"PLAIN={config_file} train.lr=1"],
        "same configuration as the baseline plain": [base, f"same={config_file} train.lr=0.01"],
        "different tasks or data.*task.name='lm' in plain, 'copy'": [base, "c=copy/transformer"],
        "different tasks or data.*data.path": [
            base,
            f"other={config_file} data.path={config_file}",
        ],
        "would not pair seed by seed": [base, f"seeded={config_file} train.seed=8"],
        "--row bad: unknown config key": [base, f"bad={config_file} model.bogus=1"],
    }
    for message, rows in cases.items():
        with pytest.raises(ConfigError, match=message):
            plan_ab(rows, tmp_path)
    with pytest.raises(ConfigError, match="unknown scale 'huge'.*none"):
        plan_ab([base, f"b={config_file} train.lr=1"], tmp_path, "huge")
    assert not (tmp_path / "ab").exists()


def test_each_run_freezes_the_ab_comparison_and_another_ab_is_refused(
    tmp_path: Path, config_file: Path
) -> None:
    from highway_transformer.experiments.plan import check_existing, write_experiment_file

    rows = [f"plain={config_file} model.gate.kind=none", f"sdu={config_file}"]
    spec = plan_ab(rows, tmp_path).specs[0]
    write_experiment_file(spec)
    stored = json.loads((spec.run_dir / "experiment.json").read_text())
    assert stored["table"] == "ab" and stored["config_file"] == str(config_file)
    assert stored["row_overrides"] == ["model.gate.kind=none"] and stored["published"] == {}
    frozen = stored["comparison"]
    assert frozen["fingerprint"] == spec.comparison.to_json()["fingerprint"]
    assert "code_sha256" in frozen["registered_with"]
    (spec.run_dir / "checkpoint").mkdir()  # interrupted: it would resume
    check_existing(spec)  # the same request: fine
    other = plan_ab([*rows, f"tanh={config_file} model.gate.activation=tanh"], tmp_path).specs[0]
    with pytest.raises(ConfigError, match="this request's is .*other rows"):
        check_existing(other)
