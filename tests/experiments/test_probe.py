"""``highway run --plan --probe N`` (``experiments/probe.py``): a row's seconds per step from
a short training here, leaving nothing behind, and the plan's line naming probed rows."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.cli_experiments import parse_run_targets
from highway_transformer.errors import ConfigError
from highway_transformer.experiments import plan_runs, run_experiments
from highway_transformer.experiments.plan import describe_plan
from highway_transformer.experiments.probe import WARMUP, probe_seconds_per_step


def _overrides(corpus: Path, steps: int) -> list[str]:
    return [
        "data.corpus=file",
        f"data.path={corpus}",
        "data.level=char",
        f"train.max_steps={steps}",
    ]


def _tiny_row(tmp_path: Path, corpus: Path, steps: int = 30):
    (spec,) = plan_runs(
        "ht-table1/t-l3", tmp_path / "runs", "tiny", seeds=1, overrides=_overrides(corpus, steps)
    )
    return spec


def _probe_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("highway-probe-*")}


def test_a_probe_times_the_rows_steps_and_leaves_nothing(tmp_path: Path, word_corpus: Path) -> None:
    spec = _tiny_row(tmp_path, word_corpus)
    threads, folders = torch.get_num_threads(), _probe_folders()
    rate = probe_seconds_per_step(spec.config, 5, threads=1)
    assert rate is not None and 0 < rate < 60
    assert torch.get_num_threads() == threads  # the plan's own threads come back
    assert _probe_folders() == folders  # its temporary run folder is gone
    assert not spec.run_dir.exists()  # the row's own folder is not touched


def test_a_run_too_short_to_probe_gives_no_rate(tmp_path: Path, word_corpus: Path) -> None:
    """The probe stops before the run's last step (its final evaluation)."""
    spec = _tiny_row(tmp_path, word_corpus, steps=WARMUP + 1)
    assert probe_seconds_per_step(spec.config, 5, threads=1) is None


def test_the_plan_prices_probed_rows_and_says_so(tmp_path: Path, word_corpus: Path) -> None:
    spec = _tiny_row(tmp_path, word_corpus)
    without = describe_plan([spec])[-1]
    assert "no time estimate (--probe N measures N steps of each row here)" in without
    said: list[str] = []
    probed = describe_plan([spec], probe=3, log=said.append)[-1]
    assert probed.startswith("at the rates measured on this kind of machine")
    assert probed.endswith("probed here for 3 steps, not whole runs: ht-table1/t-l3")
    assert said == ["ht-table1/t-l3: probing 3 steps here"]
    assert not spec.run_dir.exists()


def test_a_probed_rate_prices_a_plan_and_a_run_elsewhere(tmp_path: Path, word_corpus: Path) -> None:
    """``--plan --probe N`` in one ``--out``: a later plan with another ``--out`` finds the
    rate (the per-user cache), and so does the start line of the row's run there."""
    probed = _tiny_row(tmp_path / "a", word_corpus)
    describe_plan([probed], probe=3)
    elsewhere = _tiny_row(tmp_path / "b", word_corpus)
    line = describe_plan([elsewhere])[-1]
    assert line.startswith("at the rates measured on this kind of machine")
    assert line.endswith("; from an earlier probe here, not whole runs: ht-table1/t-l3")
    said: list[str] = []
    run_experiments(
        "ht-table1/t-l3", tmp_path / "b" / "runs", "tiny", overrides=_overrides(word_corpus, 30),
        log=said.append,
    )  # fmt: skip
    start = next(line for line in said if "steps to train" in line)
    assert start.endswith("s/step measured here") and "(train.max_steps=30)" in start


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--probe", "5"], "--probe prices a plan: give it with --plan"),
        (["--probe", "-1", "--plan"], "--probe takes a number of steps of at least 1, not -1"),
        (["--probe", "5", "--plan", "--launcher", "slurm"], "--probe measures this machine"),
    ],
)
def test_probe_outside_a_local_plan_is_an_error(
    tmp_path: Path,
    experiments_cli: Callable[[list[str]], argparse.Namespace],
    extra: list[str],
    message: str,
) -> None:
    argv = ["run", "ht-table1/t-l3", "--scale", "tiny", "--out", str(tmp_path), *extra]
    args = parse_run_targets(experiments_cli(argv))
    with pytest.raises(ConfigError, match=message):
        args.func(args)
    ab = ["ab", "--row", "a=ht-table1/t-l3", "--row", "b=ht-table1/t-l3+tanh", "--scale", "tiny"]
    args = experiments_cli([*ab, "--out", str(tmp_path), *extra])
    with pytest.raises(ConfigError, match=message):
        args.func(args)
    assert not (tmp_path / "ht-table1").exists()
