"""The run-folder layout (``storage/runfolder.py``): a saved config compared with a planned one,
metrics read past a torn last line and cut back to a checkpoint's step, results and gate
biases as ``results.json`` records them, and the older checkpoints ``train.keep_checkpoints``
keeps: exactly K, whole even when a save is killed at any point."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

from highway_transformer.config import Config, save_config
from highway_transformer.storage.folder import CONFIG_FILE as FOLDER_CONFIG
from highway_transformer.storage.folder import (
    MODEL_FILE,
    STATE_FILE,
    complete,
    recover,
    resolve,
    verify,
    write_atomically,
)
from highway_transformer.storage.runfolder import (
    ARCHIVE_DIR,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    METRICS_FILE,
    archive_name,
    archived_checkpoints,
    archiver,
    config_differences,
    flatten,
    gate_bias_values,
    keep_archived,
    read_metrics,
    read_results,
    truncate_metrics,
    write_results,
)


def test_flatten_gives_dotted_keys_and_lists_for_tuples() -> None:
    assert flatten({"a": {"b": (1, 2), "c": {"d": None}}, "e": "x"}) == {
        "a.b": [1, 2], "a.c.d": None, "e": "x"
    }  # fmt: skip


def test_config_differences_name_each_changed_setting(tmp_path: Path) -> None:
    planned = Config().replace(**{"train.lr": 0.5, "model.vocab_size": 0})
    assert config_differences(tmp_path, planned) == []  # no config.yaml: nothing to compare
    save_config(
        Config().replace(**{"train.lr": 1.0, "model.vocab_size": 50}), tmp_path / CONFIG_FILE
    )
    assert config_differences(tmp_path, planned) == [("train.lr", 1.0, 0.5)]  # vocab: automatic
    assert config_differences(tmp_path, planned, ignore=frozenset({"train.lr"})) == []
    saved = yaml.safe_load((tmp_path / CONFIG_FILE).read_text())
    del saved["train"]["lr"]  # a setting added after the run trained reads as its default
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved))
    assert config_differences(tmp_path, planned) == [("train.lr", Config().train.lr, 0.5)]


def test_metrics_skip_a_torn_line_and_cut_back_to_a_step(tmp_path: Path) -> None:
    assert read_metrics(tmp_path) == []
    records = [{"step": s, "split": "train", "loss": 1.0 / s} for s in (1, 2, 3, 4)]
    text = "".join(json.dumps(r) + "\n" for r in records) + '{"step": 5, "spl'
    (tmp_path / METRICS_FILE).write_text(text)
    assert read_metrics(tmp_path) == records
    truncate_metrics(tmp_path, 2)
    assert read_metrics(tmp_path) == records[:2]
    assert (tmp_path / METRICS_FILE).read_text().endswith("}\n")


def test_results_round_trip_and_an_unreadable_file_is_none(tmp_path: Path) -> None:
    assert read_results(tmp_path) is None
    path = write_results(tmp_path, {"steps": 4, "valid": {"loss": 1.5}})
    assert read_results(tmp_path) == {"steps": 4, "valid": {"loss": 1.5}}
    path.write_text("{trunc")
    assert read_results(tmp_path) is None


def test_gate_bias_values_are_plain_float_lists() -> None:
    class Gated(nn.Module):
        def gate_biases(self) -> dict[str, torch.Tensor]:
            return {"layer1.attn": torch.tensor([0.5, -1.0], dtype=torch.bfloat16)}

    assert gate_bias_values(Gated()) == {"layer1.attn": [0.5, -1.0]}
    assert gate_bias_values(nn.Linear(2, 2)) == {}


# --------------------------------------------------------------------------- kept checkpoints


def _save(run: Path, step: int, keep: int) -> None:
    """What the trainer's save does to the run folder: the checkpoint of ``step`` swapped in,
    the one replaced archived (``keep`` > 1), the oldest archives dropped."""

    def write(folder: Path) -> None:
        (folder / FOLDER_CONFIG).write_text("{}", encoding="utf-8")
        (folder / STATE_FILE).write_text(json.dumps({"step": step}), encoding="utf-8")
        (folder / MODEL_FILE).write_bytes(str(step).encode() * 100)

    write_atomically(run / CHECKPOINT_DIR, write, archiver(run) if keep > 1 else None)
    keep_archived(run, keep - 1)


def _step(folder: Path) -> int:
    return json.loads((folder / STATE_FILE).read_text())["step"]


def _kept(run: Path) -> tuple[int, list[int]]:
    """(the newest checkpoint's step, the archived steps), every one of them whole."""
    newest = resolve(run / CHECKPOINT_DIR)
    archived = archived_checkpoints(run)
    for folder in (newest, *archived):
        assert complete(folder), folder
        for name in (FOLDER_CONFIG, STATE_FILE, MODEL_FILE):
            verify(folder, name)
    steps = [_step(folder) for folder in archived]
    assert [f.name for f in archived] == [archive_name(s) for s in steps]
    return _step(newest), steps


def test_keep_checkpoints_keeps_exactly_that_many(tmp_path: Path) -> None:
    for step in range(1, 7):
        _save(tmp_path, step, keep=3)
        assert _kept(tmp_path) == (step, list(range(max(step - 2, 1), step)))
    assert sorted(p.name for p in (tmp_path / ARCHIVE_DIR).iterdir()) == [
        "step-000004",
        "step-000005",
    ]
    _save(tmp_path, 1_234_567, keep=3)  # more than six digits: ordered by number
    assert _kept(tmp_path) == (1_234_567, [5, 6])
    _save(tmp_path, 1_234_568, keep=1)  # one: checkpoint/ alone, as before the setting
    assert _kept(tmp_path) == (1_234_568, []) and not (tmp_path / ARCHIVE_DIR).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_DIR]


class Killed(BaseException):
    """The process dies here (nothing after it runs, no handler catches it)."""


def _killed_at(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """``os.replace`` dies at its ``call``-th use; ``shutil.rmtree`` dies after one file."""
    calls = iter(range(1_000))
    replace, rmtree = os.replace, shutil.rmtree

    def cut_replace(*args: object) -> None:
        if next(calls) == call:
            raise Killed
        replace(*args)

    def cut_rmtree(path: Path, *args: object, **kwargs: object) -> None:
        files = sorted(p for p in Path(path).rglob("*") if p.is_file())
        if files and next(calls) == call:
            files[0].unlink()
            raise Killed
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(os, "replace", cut_replace)
    monkeypatch.setattr(shutil, "rmtree", cut_rmtree)


@pytest.mark.parametrize("call", range(6))  # a save renames 4 times, deletes once (5: no kill)
def test_a_save_killed_anywhere_leaves_whole_checkpoints_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: int
) -> None:
    """Killed at each rename or deletion of a save (swap, archive, drop): the newest checkpoint
    is the one before or the new one, whole; every archive is whole; the next save (after the
    recovery every run does first) keeps exactly K again."""
    for step in range(1, 5):
        _save(tmp_path, step, keep=3)
    with monkeypatch.context() as patch:
        _killed_at(patch, call)
        with contextlib.suppress(Killed):
            _save(tmp_path, 5, keep=3)
    newest, archived = _kept(tmp_path)
    assert newest in (4, 5) and all(s < newest for s in archived), (newest, archived)
    recover(tmp_path / CHECKPOINT_DIR)
    _save(tmp_path, 6, keep=3)
    newest, archived = _kept(tmp_path)
    assert newest == 6 and len(archived) == 2 and archived[-1] in (4, 5)
    assert all(p.name.startswith("step-") for p in (tmp_path / ARCHIVE_DIR).iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_DIR, ARCHIVE_DIR]
