"""Run-folder ownership: one writer per run folder, and no silent mixing of runs.

A training (fresh or resumed) holds ``run.lock`` in its folder: a small JSON file naming
the owner (PID, host, start time). A second writer is refused with the owner's name; a
lock left by a process that no longer runs on this host is reported and taken over. A
fresh run into a folder that already holds a run's records is refused unless
``overwrite`` asks to replace them, so metrics of two runs never mix.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError, RunFolderBusy
from ..files import make_folder
from ..storage.folder import recover
from ..storage.runfolder import BEST_DIR, CHECKPOINT_DIR, LOCK_FILE, RUN_RECORDS


@contextmanager
def own_run_folder(
    out_dir: str | Path,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
) -> Iterator[Path]:
    """Hold ``out_dir``'s lock while the body trains; check the folder fits the request.

    ``resume`` needs a checkpoint there; a fresh run needs a folder without run records
    (``overwrite`` deletes them first).
    """
    if resume and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it; give one")
    out = Path(out_dir)
    lock = _acquire(out, log or (lambda message: None))
    try:
        _check_contents(out, resume, overwrite)
        yield out
    finally:
        lock.unlink(missing_ok=True)


def _acquire(out: Path, log: Callable[[str], None]) -> Path:
    make_folder(out, "--out")
    lock = out / LOCK_FILE
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    for _ in range(2):  # a second try after taking over a stale lock
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            _take_over_if_stale(lock, log)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(owner, handle)
        return lock
    raise RunFolderBusy(f"{out} is locked by another process that started at the same time")


def read_owner(lock: Path) -> dict | None:
    """The lock's owner record, or None when it cannot be read (being written, damaged)."""
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return False
    return True


def _describe(owner: dict) -> str:
    started = owner.get("started")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        if isinstance(started, int | float)
        else "an unknown time"
    )
    return f"PID {owner.get('pid')} on {owner.get('host')} (started {when})"


def _stale(owner: dict) -> bool:
    """Whether the lock's owner is known to be gone (a process of this host that has ended)."""
    pid, host = owner.get("pid"), owner.get("host")
    return host == socket.gethostname() and isinstance(pid, int) and not _alive(pid)


def holder(out: Path) -> str | None:
    """Who trains in ``out`` now (``PID … on … (started …)``); None when no one does."""
    lock = Path(out) / LOCK_FILE
    if not lock.exists():
        return None
    owner = read_owner(lock)
    if owner is None:
        return f"the owner of {lock} (unreadable)"
    return None if _stale(owner) else _describe(owner)


def _take_over_if_stale(lock: Path, log: Callable[[str], None]) -> None:
    owner = read_owner(lock)
    if owner is None:
        raise RunFolderBusy(
            f"{lock} exists but cannot be read; if no training uses {lock.parent}, delete {lock}"
        )
    if not _stale(owner):
        raise RunFolderBusy(
            f"{lock.parent} is in use by {_describe(owner)}; wait for it to finish or use "
            f"another --out (if that process is gone, delete {lock})"
        )
    log(f"taking over the stale lock of {_describe(owner)}, which no longer runs")
    lock.unlink(missing_ok=True)


def _check_contents(out: Path, resume: bool, overwrite: bool) -> None:
    for name in (CHECKPOINT_DIR, BEST_DIR):
        recover(out / name)  # a swap cut between its renames: put the checkpoint back
    found = [name for name in RUN_RECORDS if (out / name).exists()]
    if resume:
        if not (out / CHECKPOINT_DIR).is_dir():
            raise ConfigError(
                f"--resume: {out} holds no checkpoint to continue; drop --resume to start a "
                "new run" + (" (add --overwrite to replace its records)" if found else "")
            )
        return
    if found and not overwrite:
        raise ConfigError(
            f"{out} already holds a run ({', '.join(found)}); pass --resume to continue it, "
            "--overwrite to replace it, or choose another --out"
        )
    for name in found:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
