"""Each entry point validates its config once (``validation.validate``): a config crossing a
second boundary (``build_config``, then the trainer) is not checked again, and ``--scale``
says in one line what it changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer import cli, validation
from highway_transformer.config import Config
from highway_transformer.errors import ConfigError


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each config :func:`validation.check_all` checks, from a fresh record."""
    names: list[str] = []
    check_all = validation.check_all

    def counting(config: Config) -> None:
        names.append(config.name)
        check_all(config)

    monkeypatch.setattr(validation, "_PASSED", {})
    monkeypatch.setattr(validation, "check_all", counting)
    return names


def test_a_scaled_training_run_validates_once_and_names_the_rescaled_rate(
    checked: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--task", "copy", "--scale", "cpu-adamw", "train.max_steps=2"]
    argv += ["train.eval_interval=2", "--out", str(tmp_path / "run"), "--no-progress"]
    assert cli.main(argv) == 0
    assert checked == ["copy_transformer_cpu-adamw"]  # not again by the trainer
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("scale cpu-adamw: ")
    assert lines[1].startswith("scale cpu-adamw changed ")
    assert "train.lr 0.003 -> 0.001 (the cpu-adamw scale's adamw)" in lines[1]
    assert "train.max_steps" not in lines[1]  # the override won: the scale changed nothing


def test_a_planned_table_validates_each_run_once(
    checked: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    argv = ["run", *rows, "--scale", "tiny", "--seeds", "2", "--plan", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    assert "4 to start" in capsys.readouterr().out
    assert sorted(checked) == sorted(set(checked)) and len(checked) == 4


def test_an_ab_that_trains_validates_each_run_once(
    checked: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ab", "--row", "plain=copy/transformer", "--row"]
    argv += ["sig=copy/transformer model.gate.kind=sdu", "--seeds", "1", "train.max_steps=2"]
    argv += ["train.eval_interval=2", "--device", "cpu", "--out", str(tmp_path), "--no-progress"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert len(checked) == 2 and len(set(checked)) == 2  # planned, then trained: once each


def test_a_changed_config_is_checked_again() -> None:
    config = validation.validate(Config())
    config.model.dropout = 2.0  # after it passed: the next boundary sees the change
    with pytest.raises(ConfigError, match="model.dropout must be"):
        validation.validate(config)
