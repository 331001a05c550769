"""The experiment commands (``cli_experiments.py``): listing rows, splitting targets from
overrides, and the options of ``highway run``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.cli_experiments import parse_run_targets, split_targets, with_device
from highway_transformer.errors import ConfigError


def test_cli_lists_rows_and_splits_overrides(
    capsys: pytest.CaptureFixture[str], experiments_cli: Callable[[list[str]], argparse.Namespace]
) -> None:
    args = experiments_cli(["experiments", "ht-table7"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "ht-table5/l6-xl+sigmoid" in out and "21.87 h" in out and "(baseline)" in out
    names, overrides = split_targets(["ht-table1", "train.lr=0.5", "ht-table2/rt-l3"])
    assert (names, overrides) == (["ht-table1", "ht-table2/rt-l3"], ["train.lr=0.5"])
    with pytest.raises(ConfigError):
        split_targets(["train.lr=0.5"])
    argv = ["run", "ht-table1", "data.path=x", "--scale", "tiny", "train.lr=1", "--seeds", "2"]
    args = parse_run_targets(experiments_cli(argv))
    assert (args.targets, args.scale, args.seeds, args.jobs) == (
        ["ht-table1", "data.path=x", "train.lr=1"],
        "tiny",
        2,
        1,
    )
    args = parse_run_targets(experiments_cli(["run", "--jobs", "2", "ht-table2"]))
    assert (args.targets, args.jobs, args.scale) == (["ht-table2"], 2, "small")
    with pytest.raises(ConfigError, match="unrecognized arguments: --bogus"):
        parse_run_targets(experiments_cli(["run", "ht-table1", "--bogus"]))


def test_device_is_every_rows_train_device(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    experiments_cli: Callable[[list[str]], argparse.Namespace],
) -> None:
    assert with_device(None, ["train.lr=1"]) == ["train.lr=1"]
    assert with_device("cuda:1", ["train.lr=1"]) == ["train.lr=1", "train.device=cuda:1"]
    with pytest.raises(ConfigError, match="--device gpu: use auto, cpu, cuda, cuda:N or mps"):
        with_device("gpu", [])
    with pytest.raises(ConfigError, match="give the device once"):
        with_device("cpu", ["train.device=cuda"])
    argv = ["run", "ht-table1/t-l3", "--device", "cpu", "--jobs", "2", "--scale", "tiny"]
    args = parse_run_targets(experiments_cli([*argv, "--plan", "--out", str(tmp_path)]))
    assert args.device == "cpu"
    assert args.func(args) == 0  # on a CPU no memory check: the plan as before
    assert "0 finished, 0 to resume, 1 to start" in capsys.readouterr().out
    args = experiments_cli(["ab", "--row", "a=ht-table1/t-l3", "--device", "cuda:x", "--plan"])
    with pytest.raises(ConfigError, match="--device cuda:x"):
        args.func(args)


def test_trust_unverified_is_an_option_of_run_and_ab(
    tmp_path: Path, experiments_cli: Callable[[list[str]], argparse.Namespace]
) -> None:
    """Both commands take it (its effect: ``tests/experiments/test_runner.py``); where no
    run resumes it is refused."""
    argv = ["run", "ht-table1/t-l3", "--scale", "tiny", "--out", str(tmp_path)]
    args = parse_run_targets(experiments_cli([*argv, "--trust-unverified"]))
    assert args.trust_unverified
    with pytest.raises(ConfigError, match="no run here resumes: drop it"):
        args.func(args)
    args = parse_run_targets(experiments_cli([*argv, "--trust-unverified", "--plan"]))
    with pytest.raises(ConfigError, match="no run here resumes: drop it"):
        args.func(args)
    ab = ["ab", "--row", "a=ht-table1/t-l3", "--row", "b=ht-table1/t-l3+tanh", "--scale", "tiny"]
    args = experiments_cli([*ab, "--out", str(tmp_path), "--trust-unverified"])
    with pytest.raises(ConfigError, match="no run here resumes: drop it"):
        args.func(args)
