"""Run-folder ownership (``training/runlock.py``): the lock names its owner while a run holds
it and is gone after, a second writer is refused, a dead owner's lock is taken over, and a
fresh run never mixes with the records of another."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError, RunFolderBusy
from highway_transformer.storage.runfolder import LOCK_FILE, METRICS_FILE
from highway_transformer.training.runlock import holder, own_run_folder, read_owner


def test_the_lock_names_its_owner_while_held_and_is_gone_after(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with own_run_folder(out) as held:
        assert held == out
        owner = read_owner(out / LOCK_FILE)
        assert owner is not None
        assert (owner["pid"], owner["host"]) == (os.getpid(), socket.gethostname())
        assert holder(out) is not None and holder(out).startswith(f"PID {os.getpid()} on ")
    assert not (out / LOCK_FILE).exists() and holder(out) is None
    with pytest.raises(RuntimeError), own_run_folder(out):
        raise RuntimeError("training failed")
    assert not (out / LOCK_FILE).exists()  # released on an error too


def test_a_second_writer_is_refused_naming_the_first(tmp_path: Path) -> None:
    with own_run_folder(tmp_path) as out:
        with pytest.raises(RunFolderBusy) as info, own_run_folder(out, resume=True):
            pass
        assert f"is in use by PID {os.getpid()} on {socket.gethostname()}" in str(info.value)
        assert (out / LOCK_FILE).exists()  # the refused writer left the owner's lock alone


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def test_a_dead_owners_lock_is_reported_and_taken_over(tmp_path: Path) -> None:
    lock = tmp_path / LOCK_FILE
    lock.write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "started": 0}))
    assert holder(tmp_path) is None  # a stale lock holds nothing
    said: list[str] = []
    with own_run_folder(tmp_path, log=said.append):
        assert read_owner(lock)["pid"] == os.getpid()
    assert len(said) == 1 and said[0].startswith("taking over the stale lock of PID ")


def test_an_unreadable_or_foreign_lock_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / LOCK_FILE
    lock.write_text("{not json")
    assert holder(tmp_path) == f"the owner of {lock} (unreadable)"
    with pytest.raises(RunFolderBusy, match="exists but cannot be read"), own_run_folder(tmp_path):
        pass
    lock.write_text(json.dumps({"pid": _dead_pid(), "host": "elsewhere", "started": 0}))
    with pytest.raises(RunFolderBusy, match="on elsewhere"), own_run_folder(tmp_path):
        pass  # another host's process cannot be checked: never taken over


def _own(out: Path, **options: bool) -> None:
    with own_run_folder(out, **options):
        pass


def test_a_fresh_run_never_mixes_with_the_records_of_another(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text("{}\n")
    (tmp_path / "best").mkdir()
    with pytest.raises(ConfigError, match=r"already holds a run \(metrics.jsonl, best\)"):
        _own(tmp_path)
    with own_run_folder(tmp_path, overwrite=True):
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE]
    with pytest.raises(ConfigError, match="holds no checkpoint to continue"):
        _own(tmp_path, resume=True)
    (tmp_path / "checkpoint").mkdir()
    _own(tmp_path, resume=True)
    with pytest.raises(ConfigError, match="--resume continues a run and --overwrite replaces"):
        _own(tmp_path, resume=True, overwrite=True)
