"""Paper-protocol validation (``experiments/protocols.py``): a row's eval overrides scaled like
its run, which finished rows still need measuring, and ``protocol_eval.json`` written once,
atomically, from the run's best weights, never beside another process holding the folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer import api
from highway_transformer.api import evaluate_checkpoint
from highway_transformer.config import Config
from highway_transformer.errors import CheckpointError
from highway_transformer.experiments import get_experiment
from highway_transformer.experiments import protocols as protocols_module
from highway_transformer.experiments.plan import RunSpec
from highway_transformer.experiments.protocols import (
    PROTOCOL_FILE,
    measure_protocol,
    measured_line,
    needs_protocol,
    protocol_command,
    protocol_overrides,
)
from highway_transformer.training import runlock
from highway_transformer.training.trainer import train

XL_ROW = "ht-table5/l6-xl"  # HT Table 5: validation during training at segment 128, memory 896


@pytest.mark.parametrize(
    ("scale", "segment", "memory"), [("paper", 128, 896), ("small", 32, 224), ("tiny", 16, 112)]
)
def test_the_rows_eval_overrides_scale_with_the_run(scale: str, segment: int, memory: int) -> None:
    assert protocol_overrides(get_experiment(XL_ROW), scale) == [
        "data.eval_layout=reference",  # train.py validates through LMOrderedIterator too
        f"data.eval_seq_len={segment}",
        f"model.memory.eval_mem_len={memory}",  # 512 + 512 - 128 at the paper's scale
        "model.memory.eval_clamp_len=-1",
        "model.memory.eval_same_length=false",
        "data.max_eval_tokens=null",
    ]


def _spec(row: str, run_dir: Path) -> RunSpec:
    return RunSpec(get_experiment(row), 1, "tiny", run_dir, Config())


def test_needs_protocol_only_for_finished_rows_with_weights_and_no_measure(tmp_path: Path) -> None:
    said: list[str] = []
    assert not needs_protocol(_spec("ht-table1/t-l3", tmp_path), said.append)  # no protocol
    assert not needs_protocol(_spec(XL_ROW, tmp_path), said.append)  # best/ gone: says so
    assert said == [
        f"{XL_ROW} seed 1: its best/ weights are gone, so its validation cannot be measured "
        "the paper's way; the report's paper-protocol table leaves it out"
    ]
    (tmp_path / "best").mkdir()
    assert needs_protocol(_spec(XL_ROW, tmp_path), said.append)
    (tmp_path / PROTOCOL_FILE).write_text("{}", encoding="utf-8")
    assert not needs_protocol(_spec(XL_ROW, tmp_path), said.append)  # measured already
    assert len(said) == 1
    assert measured_line(_spec(XL_ROW, tmp_path)) == (
        f"{XL_ROW} seed 1: validation with the paper's protocol"
    )


def test_the_protocol_job_is_a_module_of_its_own(tmp_path: Path) -> None:
    command = protocol_command(tmp_path, get_experiment(XL_ROW), "tiny", "cpu")
    assert command == [
        sys.executable, "-m", "highway_transformer.experiments.protocol_job",
        str(tmp_path), XL_ROW, "tiny", "cpu",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def xl_run(tmp_path_factory: pytest.TempPathFactory, tiny_lm_config: Callable[..., Config]) -> Path:
    """A two-step tiny Transformer-XL run with best/ weights."""
    root = tmp_path_factory.mktemp("xl")
    text = root / "text.txt"
    text.write_text("abcabd abcabe xyzzy. " * 60, encoding="utf-8")
    xl = {"model.family": "xl", "model.attention": "relative", "model.memory.mem_len": 8}
    xl["data.context"] = 0  # the memory is the history, as in every XL preset
    config = tiny_lm_config(text, **xl, **{"train.max_steps": 2, "train.eval_interval": 2})
    train(config, root / "run", progress=False)
    return root / "run"


def test_measure_protocol_writes_the_record_once_atomically(
    xl_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = get_experiment(XL_ROW)
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str | Path, dst: str | Path) -> None:
        if Path(dst).name == PROTOCOL_FILE:  # (the token cache renames its files too)
            assert Path(src).is_file() and not Path(dst).exists()  # written aside, renamed
            replaced.append((Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(protocols_module.os, "replace", spy)
    record = measure_protocol(xl_run, row, "tiny", "cpu")
    assert replaced == [(PROTOCOL_FILE + ".tmp", PROTOCOL_FILE)]
    assert sorted(p.name for p in xl_run.glob(PROTOCOL_FILE + "*")) == [PROTOCOL_FILE]
    overrides = protocol_overrides(row, "tiny")
    direct = evaluate_checkpoint(xl_run / "best", ["valid"], torch.device("cpu"), overrides)
    assert record == {
        "protocol": row.protocols["eval_bpc"],
        "overrides": overrides,
        "valid": direct["valid"],
    }
    assert json.loads((xl_run / PROTOCOL_FILE).read_text(encoding="utf-8")) == record

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured twice")

    monkeypatch.setattr(api, "evaluate_checkpoint", never)
    assert measure_protocol(xl_run, row, "tiny", "cpu") == record  # read back, not measured


@pytest.mark.skipif(runlock.fcntl is None, reason="the kernel's flock: POSIX")
def test_a_row_another_process_holds_is_left_to_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hold_folder: Callable[[Path], subprocess.Popen[str]],
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured beside the process holding the folder")

    monkeypatch.setattr(api, "evaluate_checkpoint", never)
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)  # finished, with weights to measure
    hold_folder(run)  # another runner measuring it
    assert measure_protocol(run, get_experiment(XL_ROW), "tiny", "cpu") is None
    assert not (run / PROTOCOL_FILE).exists()
    spec = RunSpec(get_experiment(XL_ROW), 1, "tiny", run, Config())
    assert measured_line(spec) == (
        f"{XL_ROW} seed 1: validation with the paper's protocol left to the process using its "
        "folder"
    )


def test_a_row_without_a_protocol_or_a_failed_measure_writes_nothing(tmp_path: Path) -> None:
    assert measure_protocol(tmp_path, get_experiment("ht-table1/t-l3"), "tiny", "cpu") is None
    with pytest.raises(CheckpointError):  # no best/ weights to measure
        measure_protocol(tmp_path, get_experiment(XL_ROW), "tiny", "cpu")
    assert list(tmp_path.iterdir()) == []
