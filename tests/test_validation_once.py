"""Each entry point validates its config once (``validation.check_all`` runs once per config):
a config crossing a second boundary (``build_config``, then the trainer) or planned twice (an
A/B's rows, then its runs) is not checked again."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer import cli, validation
from highway_transformer.api import build_model
from highway_transformer.config import Config, ModelConfig
from highway_transformer.errors import ConfigError


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each config :func:`validation.check_all` checks."""
    names: list[str] = []
    check_all = validation.check_all

    def counting(config: Config) -> None:
        names.append(config.name)
        check_all(config)

    monkeypatch.setattr(validation, "check_all", counting)
    return names


def test_a_scaled_training_run_validates_once_and_names_what_the_scale_changed(
    checked: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--task", "copy", "--scale", "cpu-adamw", "train.max_steps=2"]
    argv += ["train.eval_interval=2", "--out", str(tmp_path / "run"), "--no-progress"]
    assert cli.main(argv) == 0
    assert checked == ["copy_transformer_cpu-adamw"]  # not before scaling, not by the trainer
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("scale cpu-adamw: width x0.25")
    assert lines[1].startswith("scale cpu-adamw changed ")  # one line, after the factors
    assert "train.lr 0.003 -> 0.001 (the cpu-adamw scale's adamw)" in lines[1]
    assert "data.seq_len 400 -> 100" in lines[1]
    assert "train.max_steps" not in lines[1]  # the override won: the scale changed nothing
    assert not any(line.startswith("scale cpu-adamw changed") for line in lines[2:])


def test_a_training_run_without_a_scale_validates_once_and_prints_no_scale_line(
    checked: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--task", "copy", "train.max_steps=2", "train.eval_interval=2"]
    assert cli.main([*argv, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert checked == ["copy_transformer"]
    assert "scale" not in capsys.readouterr().err


def test_an_api_build_validates_once(checked: list[str]) -> None:
    build_model(ModelConfig(vocab_size=10, d_model=16, n_heads=2, d_inner=32, n_layers=1))
    assert len(checked) == 1


def test_an_ab_validates_each_run_once(
    checked: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["--row", "plain=copy/transformer", "--row", "sdu=copy/transformer model.gate.kind=sdu"]
    argv = ["ab", *rows, "--scale", "tiny", "--seeds", "2", "--out", str(tmp_path), "--plan"]
    assert cli.main(argv) == 0
    assert "4 to start" in capsys.readouterr().out
    assert sorted(checked) == sorted(
        f"ab_{r}_tiny_seed{s}" for r in ("plain", "sdu") for s in (1, 2)
    )


def test_an_entry_point_checks_a_config_once_and_a_changed_one_again(checked: list[str]) -> None:
    config = Config()
    with validation.validating_once():
        assert validation.validate(config) is config  # returned for chaining
        validation.validate(Config())  # another object of the same values
        assert len(checked) == 1  # the same values: checked once
        config.model.dropout = 1.5  # changed in place after it passed: checked again, refused
        with pytest.raises(ConfigError, match=r"^model\.dropout must be >= 0 and < 1, got 1\.5"):
            validation.validate(config)
        with pytest.raises(ConfigError, match="must be of type int"):  # "3" is not 3
            validation.validate(Config(model=ModelConfig(n_layers="3")))  # type: ignore[arg-type]
    assert len(checked) == 3
    validation.validate(Config())  # outside an entry point: every call checks (registries
    validation.validate(Config())  # may change between calls, in a test)
    assert len(checked) == 5
