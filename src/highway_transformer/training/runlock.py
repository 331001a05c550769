"""Run-folder ownership: one writer per run folder, and no silent mixing of runs.

A training holds the kernel's lock (``flock``) on ``run.lock`` in its folder while it trains;
the kernel releases it however its holder ends, so that lock is never stale. What this module
adds to ``flock``: the file names its holder (PID, host, start time) for the refusal of a
second writer; a file deleted on release is never locked by a latecomer; a runner *claims* a
folder (:func:`claim_run_folder`) before it reads the run's state, and a training of the same
process uses that claim, or the locked descriptor a runner handed to its child
(:func:`claim_for_child`), so no second runner can take the folder in between; a fresh run
into a folder holding a run's records is refused unless ``overwrite`` replaces them. Where
the kernel keeps no locks (Windows, some file systems) the file itself is the lock: created
exclusively, deleted at the end, taken over when its owner, a process of this host, has ended.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, RunFolderBusy
from ..files import make_folder
from ..storage.folder import recover
from ..storage.runfolder import BEST_DIR, CHECKPOINT_DIR, LOCK_FILE, RUN_RECORDS

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

#: Tries, and the pause between them, before a held lock is reported: a reader that checks
#: whether the folder is in use (``highway prune``) holds it for an instant.
TRIES, PAUSE_S = 10, 0.05

#: ``flock`` errors that mean the file system keeps no locks (the file is the lock then).
NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
#: The descriptor of a run folder's lock a runner handed to the process it started.
INHERITED_LOCK = "HIGHWAY_RUN_LOCK_FD"

#: Folders this process claimed (resolved path → whether a training inside uses the claim).
_CLAIMED: dict[Path, bool] = {}


@contextmanager
def own_run_folder(
    out_dir: str | Path,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
    restart: bool = False,
) -> Iterator[Path]:
    """Hold ``out_dir``'s lock while the body trains; check the folder fits the request.

    ``resume`` needs a checkpoint there; a fresh run needs a folder without run records
    (``overwrite`` deletes them first); a ``restart`` (torchrun's, after a failed rank) takes
    the folder as its failed attempt left it.
    """
    if resume and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it; give one")
    out = Path(out_dir)
    release = _take_claim(out) or _adopt_inherited(out) or _acquire(out, log or (lambda m: None))
    try:
        _check_contents(out, resume, overwrite, restart)
        yield out
    finally:
        release()


@contextmanager
def claim_run_folder(
    out_dir: str | Path, log: Callable[[str], None] | None = None
) -> Iterator[bool]:
    """Hold ``out_dir``'s lock while the body runs and yield True; yield False, with nothing
    in the folder touched, when another process holds it. One :func:`own_run_folder` inside
    the body uses the claim instead of locking again."""
    out = Path(out_dir)
    try:
        release = _acquire(out, log or (lambda message: None))
    except RunFolderBusy:
        yield False
        return
    key = out.resolve()
    _CLAIMED[key] = False
    try:
        yield True
    finally:
        del _CLAIMED[key]
        release()


def _take_claim(out: Path) -> Callable[[], None] | None:
    """The training's use of this process's claim on ``out``; None where there is none."""
    key = out.resolve()
    if key not in _CLAIMED:
        return None
    if _CLAIMED[key]:
        raise RunFolderBusy(f"{out} is in use by a training of this process; use another --out")
    _CLAIMED[key] = True

    def release() -> None:
        if key in _CLAIMED:
            _CLAIMED[key] = False

    return release


@dataclass
class Handover:
    """A claim for a process to start: pass it ``env`` and ``fds`` (``subprocess.Popen(env=...,
    pass_fds=...)``) and set ``given`` once it started; a claim not given is released."""

    env: dict[str, str]
    fds: tuple[int, ...]
    given: bool = False


@contextmanager
def claim_for_child(
    out_dir: str | Path, log: Callable[[str], None] | None = None
) -> Iterator[Handover | None]:
    """Claim ``out_dir`` for a process started in the body, whose :func:`own_run_folder`
    keeps the lock (:class:`Handover`); None, nothing touched, when another process holds the
    folder. Where the file system keeps no kernel locks the claim ends before the body (the
    child takes the lock itself, as a second runner could in between)."""
    out = Path(out_dir)
    make_folder(out, "--out")
    lock = out / LOCK_FILE
    try:
        fd = _flock_descriptor(lock, log or (lambda message: None)) if fcntl is not None else None
    except RunFolderBusy:
        yield None
        return
    if fd is None:
        with claim_run_folder(out, log) as mine:
            claimed = mine
        yield Handover({}, ()) if claimed else None
        return
    handover = Handover({INHERITED_LOCK: str(fd)}, (fd,))
    try:
        yield handover
    finally:
        if handover.given:
            os.close(fd)  # the child's copy keeps the lock (and removes the file when it ends)
        else:
            _releaser(fd, lock)()


def _adopt_inherited(out: Path) -> Callable[[], None] | None:
    """The lock on ``out`` a runner handed to this process (:func:`claim_for_child`), made
    this process's; None where none was handed over."""
    named = os.environ.get(INHERITED_LOCK, "")
    lock = out / LOCK_FILE
    if not named.isdigit() or not _same_file(int(named), lock):
        return None
    del os.environ[INHERITED_LOCK]  # for this folder only, not for processes started later
    fd = int(named)
    os.ftruncate(fd, 0)
    os.pwrite(fd, _owner_record(), 0)
    return _releaser(fd, lock)


def _owner_record() -> bytes:
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    return json.dumps(owner).encode("utf-8")


def _acquire(out: Path, log: Callable[[str], None]) -> Callable[[], None]:
    """Take ``out``'s lock; the function that releases it."""
    make_folder(out, "--out")
    lock = out / LOCK_FILE
    fd = _flock_descriptor(lock, log) if fcntl is not None else None
    return _acquire_file(lock, log) if fd is None else _releaser(fd, lock)


def _flock_descriptor(lock: Path, log: Callable[[str], None]) -> int | None:
    """A descriptor holding the kernel's lock on ``lock``, this process written into it;
    None where the file system keeps no locks; :class:`RunFolderBusy` where another process
    holds it."""
    for _ in range(TRIES):
        created = True
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            created = False
            try:
                fd = os.open(lock, os.O_RDWR)
            except FileNotFoundError:  # released between the two opens: try again
                continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            time.sleep(PAUSE_S)
            continue
        except OSError as exc:
            os.close(fd)
            if exc.errno not in NO_LOCKS:
                raise
            if created:
                lock.unlink(missing_ok=True)
            return None
        if not _same_file(fd, lock):  # its holder deleted it on release: lock the new one
            os.close(fd)
            continue
        previous = None if created else read_owner(lock)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, _owner_record())
        except OSError:
            lock.unlink(missing_ok=True)
            os.close(fd)
            raise
        if previous is not None:
            log(f"note: {lock} named {_describe(previous)}, which ended without removing it")
        return fd
    raise RunFolderBusy(f"{lock.parent} is in use by {_holder_of(lock)}; wait for it to finish "
                        "or use another --out")  # fmt: skip


def _releaser(fd: int, lock: Path) -> Callable[[], None]:
    def release() -> None:
        if _same_file(fd, lock):
            lock.unlink(missing_ok=True)  # while holding it: no one locks a file going away
        os.close(fd)  # the kernel's lock goes with the last descriptor

    return release


def _same_file(fd: int, path: Path) -> bool:
    try:
        mine, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _held(lock: Path) -> bool | None:
    """Whether a process holds the kernel's lock on ``lock``; None where that cannot be
    known (no ``flock``, no lock file, a file system without locks)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:  # shared: conflicts with a holder's exclusive lock only, and needs no write access
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # releases the probe's own lock
    return False


def read_owner(lock: Path) -> dict | None:
    """The lock's owner record, or None when it cannot be read (being written, damaged)."""
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _describe(owner: dict) -> str:
    started = owner.get("started")
    when = "an unknown time"
    if isinstance(started, int | float):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    return f"PID {owner.get('pid')} on {owner.get('host')} (started {when})"


def _holder_of(lock: Path) -> str:
    owner = read_owner(lock)
    return _describe(owner) if owner is not None else f"the owner of {lock} (unreadable)"


def holder(out: Path) -> str | None:
    """Who trains in ``out`` now (``PID … on … (started …)``); None when no one does."""
    lock = Path(out) / LOCK_FILE
    if not lock.exists():
        return None
    held = _held(lock)
    if held is False:
        return None  # a record left by a process that ended: information only
    if held is None:  # the file is the lock
        owner = read_owner(lock)
        if owner is not None and _stale(owner):
            return None
    return _holder_of(lock)


# ------------------------------------------------------------------ without flock


def _alive(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill(pid, 0) would terminate the process there
        return True
    try:
        os.kill(pid, 0)
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:  # no such process
        return False
    return True


def _stale(owner: dict) -> bool:
    """Whether the lock's owner is known to be gone (a process of this host that has ended)."""
    pid, host = owner.get("pid"), owner.get("host")
    return host == socket.gethostname() and isinstance(pid, int) and not _alive(pid)


def _acquire_file(lock: Path, log: Callable[[str], None]) -> Callable[[], None]:
    """The file as the lock: created exclusively, deleted on release."""
    for _ in range(2):  # a second try after taking over a stale lock
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            _take_over_if_stale(lock, log)
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(_owner_record())
        return lambda: lock.unlink(missing_ok=True)
    raise RunFolderBusy(f"{lock.parent} is locked by another process that started at the same time")


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


# ------------------------------------------------------------------ contents


def _check_contents(out: Path, resume: bool, overwrite: bool, restart: bool = False) -> None:
    for name in (CHECKPOINT_DIR, BEST_DIR):
        recover(out / name)  # a swap cut between its renames: put the checkpoint back
    if restart:
        return
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
