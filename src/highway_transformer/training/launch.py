"""``highway train --nproc N``: start N local training processes with PyTorch's launcher.

This is ``torchrun --standalone --nproc-per-node N -m highway_transformer.cli train ...`` run
in-process, with one line per outcome and ranks that do not outlive their launcher:

* each rank hands the line it would print at its end (an error, or ``stopped by ...``) to the
  launcher instead (a small file in the folder ``HIGHWAY_RANK_REPORTS`` names), and the
  launcher prints one line for the run: the rank where a failure began (an error of its own,
  killed by a signal, a crash), not the ranks whose collectives failed because of it; a stop
  in rank 0's words (every rank stops at the same step);
* each rank asks the kernel for SIGTERM when the launcher dies (Linux; even by SIGKILL), so
  it checkpoints and stops as on any stop signal, and then prints its line itself (rank 0
  alone for a stop).

A stop signal to the launcher is passed on to the ranks by torch's launcher. With
``max_restarts`` M the launcher starts every rank again when one fails, up to M times; the new
ranks continue from the last checkpoint (``Trainer.restarted``) and report afresh.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DistributedError, HighwayError, TrainingInterrupted
from .stopping import WARNING_SIGNALS, interrupted, stop_when_launcher_dies

#: How long torch's launcher waits for stopped ranks before killing them (its default).
SHUTDOWN_GRACE_S = 30

#: Set for the ranks: where they hand their last line over, and the launcher's PID.
REPORTS_ENV = "HIGHWAY_RANK_REPORTS"
LAUNCHER_ENV = "HIGHWAY_LAUNCHER_PID"

#: What ended a rank. Its report says one of the first four: a stop signal, an error of its
#: own, a collective failed because another rank ended, or stayed silent (timeout); a rank
#: without a report was killed by a signal or crashed (a traceback), or was ended by the
#: launcher's SIGTERM once another rank had ended (outside training, where it is no request).
STOPPED, FAILED, PEER, TIMEOUT, SIGNAL, CRASH, ENDED = (
    "stopped", "failed", "peer", "timeout", "signal", "crash", "ended"
)  # fmt: skip
#: Where a failure begins: not in a rank that only lost its peers.
OWN = (FAILED, SIGNAL, CRASH)


#: The options of ``highway train`` that the launcher takes (its ranks must not relaunch).
LAUNCHER_OPTIONS = ("--nproc", "--max-restarts")


def without_nproc(argv: Sequence[str]) -> list[str]:
    """``argv`` minus the launcher's options (``--nproc N``, ``--max-restarts=M``, ...)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in LAUNCHER_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in LAUNCHER_OPTIONS)):
            out.append(arg)
    return out


def launch(nproc: int, train_argv: Sequence[str], max_restarts: int = 0) -> None:
    """Run ``highway train TRAIN_ARGV`` in ``nproc`` local processes, started again from the
    last checkpoint up to ``max_restarts`` times when a rank fails; raise one error for the
    run: the failure where it began (in the last attempt), or the stop."""
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    if max_restarts < 0:
        raise ConfigError(f"--max-restarts must be >= 0, got {max_restarts}")
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    # the launcher's own log lines repeat what the one line says (each of its loggers has a
    # level of its own: the parent's is not enough)
    for name in ["torch.distributed.elastic", *logging.Logger.manager.loggerDict]:
        if name.startswith("torch.distributed.elastic"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    args = get_args_parser().parse_args(
        ["--standalone", f"--nproc-per-node={nproc}", f"--max-restarts={max_restarts}"]
        + ["--module", "highway_transformer.cli", "train", *train_argv]
    )
    with tempfile.TemporaryDirectory(prefix="highway-ranks-") as folder:
        reports = Path(folder)
        try:
            with (
                _environment({REPORTS_ENV: folder, LAUNCHER_ENV: str(os.getpid())}),
                _ignoring(WARNING_SIGNALS),
            ):
                run(args)
        except SignalException as exc:  # passed on: the ranks checkpoint and stop
            raise _stopped(read_reports(reports), nproc, int(exc.sigval)) from None
        except ChildFailedError as exc:
            raise outcome(exc.failures, read_reports(reports), nproc, max_restarts) from None


@contextmanager
def _ignoring(numbers: Sequence[int]) -> Iterator[None]:
    """Ignore the signals ``numbers`` while in the body: a scheduler's warning (USR1/USR2)
    reaches every process of a job, and the ranks stop at a checkpoint on it; the launcher
    must live on to collect them (by default these signals end a process)."""
    if threading.current_thread() is not threading.main_thread():  # no handlers there
        yield
        return
    before = {number: signal.signal(number, signal.SIG_IGN) for number in numbers}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` (what the started processes inherit) while in the body."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --------------------------------------------------------------------------- the launcher


def read_reports(folder: Path) -> dict[int, dict[str, Any]]:
    """What each rank handed over (rank -> report); unreadable reports are left out."""
    reports = {}
    for path in folder.glob("rank-*.json"):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            reports[int(report["rank"])] = report
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return reports


def outcome(
    failures: Mapping[int, Any],
    reports: Mapping[int, dict[str, Any]],
    nproc: int,
    restarts: int = 0,
) -> HighwayError:
    """The one error of a run whose ranks ended with ``failures`` (torch's ``ProcessFailure``
    by rank, in the order the launcher saw them end) and ``reports``, after ``restarts``
    restarts.

    A stop (every rank stopped, or lost a stopped peer) is an interruption. Otherwise the
    failure began in the first rank whose failure is its own, unless the first rank to end
    waited in vain for a silent one (a timeout: the silent rank was only killed after it)."""
    kinds = {
        rank: _kind(failure, reports.get(rank), first=n == 0)
        for n, (rank, failure) in enumerate(failures.items())
    }
    if STOPPED in kinds.values() and set(kinds.values()) <= {STOPPED, PEER, ENDED}:
        return _stopped(reports, nproc)
    ranks = list(failures)
    own = [rank for rank in ranks if kinds[rank] in OWN]
    root = ranks[0] if kinds[ranks[0]] == TIMEOUT or not own else own[0]
    kind, report = kinds[root], reports.get(root, {})
    stopped = "the other ranks were stopped and the last checkpoint is intact"
    after = f", after {restarts} restart{'s' if restarts > 1 else ''}" if restarts else ""
    if kind == SIGNAL:
        how = f"killed by {failures[root].signal_name()}{after}"
        return DistributedError(f"rank {root} of {nproc} failed ({how}); {stopped}: continue "
                                "with --resume")  # fmt: skip
    if kind == CRASH:
        how = f"exit status {failures[root].exitcode}{after}"
        return DistributedError(f"rank {root} of {nproc} failed ({how}); {stopped}: fix the "
                                "cause above and continue with --resume")  # fmt: skip
    line = str(report.get("line", ""))
    if kind != FAILED:  # a lost peer or a timeout, in the rank's own words
        return DistributedError(line)
    lines = {str(r.get("line")) for r in reports.values() if r.get("kind") == FAILED}
    if len(lines) == 1 and all(kinds[rank] == FAILED for rank in ranks) and len(ranks) > 1:
        return DistributedError(line)  # every rank refused the same input
    return DistributedError(f"rank {root} of {nproc}: {line} ({stopped})")


def _kind(failure: Any, report: dict[str, Any] | None, first: bool) -> str:
    if report is not None and report.get("kind") in (STOPPED, FAILED, PEER, TIMEOUT):
        return str(report["kind"])
    if failure.exitcode == -signal.SIGTERM and not first:
        return ENDED
    return SIGNAL if failure.exitcode < 0 else CRASH


def _stopped(
    reports: Mapping[int, dict[str, Any]], nproc: int, number: int | None = None
) -> HighwayError:
    """The interruption of a stopped run, in rank 0's words (where the checkpoint is) when it
    handed them over, else the launcher's."""
    stops = [reports[rank] for rank in sorted(reports) if reports[rank].get("kind") == STOPPED]
    if stops and isinstance(stops[0].get("signal"), int):
        return TrainingInterrupted(str(stops[0].get("line")), signal_number=stops[0]["signal"])
    return interrupted(
        number if number is not None else int(signal.SIGTERM),
        f"the {nproc} processes were asked to stop at a checkpoint (within "
        f"{SHUTDOWN_GRACE_S} s, or they were killed and the last checkpoint stands)",
        "continue with --resume",
    )


# --------------------------------------------------------------------------- the ranks


def _launcher() -> int | None:
    """The PID of the ``highway train --nproc`` that started this rank, if one did."""
    value = os.environ.get(LAUNCHER_ENV)
    if value is None or os.environ.get("RANK") is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def watch_launcher() -> None:
    """In a rank of ``highway train --nproc``: SIGTERM when the launcher dies (Linux), so the
    rank checkpoints and stops instead of training on unwatched."""
    launcher = _launcher()
    if launcher is not None:
        stop_when_launcher_dies(launcher)
        _forget_last_attempt()


def _forget_last_attempt() -> None:
    """Delete this rank's report of an earlier attempt (the launcher restarted the run): the
    launcher must read only this attempt's."""
    folder, rank = os.environ.get(REPORTS_ENV), os.environ.get("RANK")
    if folder and rank is not None:
        (Path(folder) / f"rank-{rank}.json").unlink(missing_ok=True)


def hand_over(kind: str, line: str, signal_number: int | None = None) -> bool:
    """Whether this process leaves its last ``line`` (``kind``: stopped, failed, peer or
    timeout) to another instead of printing it: a rank hands it to the launcher that started
    it while that lives; a stop is told by rank 0 alone."""
    rank = os.environ.get("RANK")
    if rank is None:
        return False
    folder = os.environ.get(REPORTS_ENV)
    launcher = _launcher()
    if folder and launcher is not None and os.getppid() == launcher:
        report = {"rank": int(rank), "kind": kind, "line": line, "signal": signal_number}
        path = Path(folder) / f"rank-{rank}.json"
        try:
            path.with_suffix(".tmp").write_text(json.dumps(report), encoding="utf-8")
            os.replace(path.with_suffix(".tmp"), path)
            return True
        except OSError:
            pass  # the launcher's folder is gone: say it here
    return kind == STOPPED and rank != "0"
