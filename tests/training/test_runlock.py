"""Run-folder ownership (``training/runlock.py``): the kernel's lock on ``run.lock`` while a
run holds it, the file naming its owner and gone after; a second writer refused with one line;
a lock whose holder was killed (SIGKILL) free again, a record naming a live but unrelated PID
no lock at all; the file-as-lock fallback where there is no ``flock``; and a fresh run never
mixing with the records of another."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.cli import main
from highway_transformer.errors import ConfigError, RunFolderBusy
from highway_transformer.storage.runfolder import LOCK_FILE, METRICS_FILE
from highway_transformer.training import runlock
from highway_transformer.training.runlock import (
    INHERITED_LOCK,
    claim_for_child,
    claim_run_folder,
    holder,
    own_run_folder,
    read_owner,
)

HoldFolder = Callable[[Path], "subprocess.Popen[str]"]

needs_flock = pytest.mark.skipif(runlock.fcntl is None, reason="the kernel's flock: POSIX")


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
        assert holder(out) is not None  # and the owner still holds it


@needs_flock
def test_a_second_trainer_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hold_folder: HoldFolder
) -> None:
    owner = hold_folder(tmp_path)
    code = main(["train", "--task", "adding", "--out", str(tmp_path), "train.max_steps=1"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {tmp_path} is in use by PID {owner.pid} on ")
    assert err.rstrip().endswith("wait for it to finish or use another --out")


@needs_flock
def test_a_lock_whose_holder_was_killed_is_free_again(
    tmp_path: Path, hold_folder: HoldFolder
) -> None:
    owner = hold_folder(tmp_path)
    assert holder(tmp_path) is not None and f"PID {owner.pid} " in holder(tmp_path)
    with pytest.raises(RunFolderBusy, match=f"in use by PID {owner.pid} "):
        _own(tmp_path)
    owner.send_signal(signal.SIGKILL)  # no chance to release anything
    owner.wait()
    lock = tmp_path / LOCK_FILE
    assert read_owner(lock)["pid"] == owner.pid  # the record stays, as information
    assert holder(tmp_path) is None  # the kernel released the lock
    said: list[str] = []
    with own_run_folder(tmp_path, log=said.append):
        assert read_owner(lock)["pid"] == os.getpid()
    assert len(said) == 1 and said[0].startswith(f"note: {lock} named PID {owner.pid} on ")
    assert said[0].endswith("which ended without removing it")
    assert not lock.exists()


@needs_flock
def test_a_record_naming_a_live_process_is_no_lock(tmp_path: Path) -> None:
    """A PID reused by another process (here: this one, and PID 1) locks nothing."""
    lock = tmp_path / LOCK_FILE
    for pid in (os.getpid(), 1):
        lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": 0}))
        assert holder(tmp_path) is None
        with own_run_folder(tmp_path):
            assert read_owner(lock)["pid"] == os.getpid()
    lock.write_text("{not json")  # an unreadable record: no lock either
    with own_run_folder(tmp_path):
        pass


# --------------------------------------------------------------------------- runners' claims


def test_a_claimed_folder_trains_inside_its_claim_one_training_at_a_time(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with claim_run_folder(out) as mine:
        assert mine and holder(out).startswith(f"PID {os.getpid()} on ")
        busy = pytest.raises(RunFolderBusy, match="in use by a training of this process")
        with own_run_folder(out), busy:  # the training takes the claim over: no second lock
            _own(out)
        _own(out)  # the first training ended: the claim serves the next
        assert holder(out) is not None  # still claimed
    assert holder(out) is None and not (out / LOCK_FILE).exists()
    with claim_run_folder(out) as mine, claim_run_folder(out) as again:
        assert mine and again is False  # one claim a folder, in this process too


@needs_flock
def test_a_folder_another_process_holds_is_not_claimed_nor_touched(
    tmp_path: Path, hold_folder: HoldFolder
) -> None:
    owner = hold_folder(tmp_path)
    (tmp_path / METRICS_FILE).write_text("its records\n")
    with claim_run_folder(tmp_path) as mine:
        assert mine is False
    with claim_for_child(tmp_path) as handed:
        assert handed is None
    assert read_owner(tmp_path / LOCK_FILE)["pid"] == owner.pid
    assert (tmp_path / METRICS_FILE).read_text() == "its records\n"


CHILD = """
import sys
from highway_transformer.training.runlock import own_run_folder
with own_run_folder(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


@needs_flock
def test_a_claim_handed_to_a_child_keeps_the_folder_locked_throughout(tmp_path: Path) -> None:
    """No instant between the runner's claim and the child's training leaves the folder free:
    the child inherits the locked descriptor and its ``own_run_folder`` adopts it."""
    out, lock = tmp_path / "run", tmp_path / "run" / LOCK_FILE
    with claim_for_child(out) as handed:
        assert handed is not None
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(out)], env={**os.environ, **handed.env},
            pass_fds=handed.fds, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        handed.given = True
    try:
        with claim_run_folder(out) as mine:  # before the child adopted it too
            assert mine is False
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert read_owner(lock)["pid"] == child.pid
        assert INHERITED_LOCK not in os.environ
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        child.wait()
    assert child.returncode == 0 and not lock.exists() and holder(out) is None
    with claim_for_child(out) as handed:  # a claim no process was given is released
        assert handed is not None and holder(out) is not None
    assert not lock.exists() and holder(out) is None


def test_a_descriptor_named_for_another_file_is_not_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(tmp_path / "unrelated", "w") as other:
        monkeypatch.setenv(INHERITED_LOCK, str(other.fileno()))
        with own_run_folder(tmp_path / "run"):
            assert read_owner(tmp_path / "run" / LOCK_FILE)["pid"] == os.getpid()
        assert os.environ[INHERITED_LOCK] == str(other.fileno())  # left for its own folder
        assert not other.closed


# --------------------------------------------------------------------------- no flock


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


class _NoLocks:
    """An ``fcntl`` whose ``flock`` fails as on a file system that keeps no locks."""

    LOCK_EX, LOCK_SH, LOCK_NB = 2, 1, 4

    @staticmethod
    def flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")


@pytest.fixture(params=["no fcntl", "no locks"])
def file_lock(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows (no ``fcntl``), and a file system whose ``flock`` fails: the file is the lock."""
    monkeypatch.setattr(runlock, "fcntl", None if request.param == "no fcntl" else _NoLocks)


def test_without_flock_the_file_is_the_lock(tmp_path: Path, file_lock: None) -> None:
    with own_run_folder(tmp_path) as out:
        assert read_owner(out / LOCK_FILE)["pid"] == os.getpid()
        assert holder(out).startswith(f"PID {os.getpid()} on ")
        with pytest.raises(RunFolderBusy, match="if that process is gone, delete"):
            _own(out)
    assert not (tmp_path / LOCK_FILE).exists()


def test_without_flock_a_claim_is_the_file_and_a_child_takes_its_own(
    tmp_path: Path, file_lock: None
) -> None:
    with claim_run_folder(tmp_path) as mine:
        assert mine and holder(tmp_path).startswith(f"PID {os.getpid()} on ")
        with own_run_folder(tmp_path):
            pass
    with claim_for_child(tmp_path) as handed:
        assert handed is not None and (handed.env, handed.fds) == ({}, ())  # the child locks
        assert holder(tmp_path) is None
    assert not (tmp_path / LOCK_FILE).exists()


def test_without_flock_a_dead_owners_lock_is_taken_over(tmp_path: Path, file_lock: None) -> None:
    lock = tmp_path / LOCK_FILE
    lock.write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "started": 0}))
    assert holder(tmp_path) is None  # a stale lock holds nothing
    said: list[str] = []
    with own_run_folder(tmp_path, log=said.append):
        assert read_owner(lock)["pid"] == os.getpid()
    assert len(said) == 1 and said[0].startswith("taking over the stale lock of PID ")


def test_without_flock_an_unreadable_or_foreign_lock_is_refused(
    tmp_path: Path, file_lock: None
) -> None:
    lock = tmp_path / LOCK_FILE
    lock.write_text("{not json")
    assert holder(tmp_path) == f"the owner of {lock} (unreadable)"
    with pytest.raises(RunFolderBusy, match="exists but cannot be read"), own_run_folder(tmp_path):
        pass
    lock.write_text(json.dumps({"pid": _dead_pid(), "host": "elsewhere", "started": 0}))
    with pytest.raises(RunFolderBusy, match="on elsewhere"), own_run_folder(tmp_path):
        pass  # another host's process cannot be checked: never taken over


def test_on_windows_a_pid_is_never_probed_with_a_signal(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.kill(pid, 0)`` terminates the process on Windows: there a recorded owner counts as
    alive (the message says to delete the lock if it is gone)."""
    monkeypatch.setattr(runlock.sys, "platform", "win32")
    monkeypatch.setattr(runlock.os, "kill", lambda *args: pytest.fail("os.kill called"))
    assert runlock._alive(_dead_pid())


# --------------------------------------------------------------------------- contents


def _own(out: Path, **options: bool) -> None:
    with own_run_folder(out, **options):
        pass


def test_a_fresh_run_never_mixes_with_the_records_of_another(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text("{}\n")
    (tmp_path / "best").mkdir()
    (tmp_path / "checkpoints").mkdir()  # older checkpoints (train.keep_checkpoints)
    with pytest.raises(
        ConfigError, match=r"already holds a run \(metrics.jsonl, checkpoints, best\)"
    ):
        _own(tmp_path)
    with own_run_folder(tmp_path, overwrite=True):
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE]
    with pytest.raises(ConfigError, match="holds no checkpoint to continue"):
        _own(tmp_path, resume=True)
    (tmp_path / "checkpoint").mkdir()
    _own(tmp_path, resume=True)
    with pytest.raises(ConfigError, match="--resume continues a run and --overwrite replaces"):
        _own(tmp_path, resume=True, overwrite=True)
