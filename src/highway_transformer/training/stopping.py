"""Stopping a run on request without losing it: SIGTERM, SIGINT, SIGHUP, SIGUSR1 or SIGUSR2
ends training at the next step boundary with a checkpoint there, so ``--resume`` (or the same
``highway run``) continues exactly where it stopped.

A cluster's scheduler sends SIGTERM before it kills a job (Slurm at the time limit or on
preemption) and, when asked (``--signal``), USR1 or USR2 some time before that; ``kill PID``
sends SIGTERM, Ctrl-C SIGINT, a closed terminal or SSH session SIGHUP. The first such signal
is only recorded; the trainer reads it at each step (with several processes, on the step's own
all-reduce, so all stop at the same step). A second Ctrl-C
interrupts at once (``KeyboardInterrupt``), losing the steps since the last checkpoint.
A run started by ``highway run`` is also asked (SIGTERM, on Linux) when the runner itself dies,
even by SIGKILL, so no row trains on unwatched; so is each rank of ``highway train --nproc N``
when the launcher dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from ..errors import TrainingInterrupted

#: A scheduler's warning before it preempts a job or its time limit comes (Slurm's
#: ``--signal``: submitit asks for USR2; POSIX only).
WARNING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGUSR1", "SIGUSR2") if hasattr(signal, name)
)
#: The signals that ask a run to stop at the next step boundary (SIGHUP: the terminal or SSH
#: session closed; POSIX only).
STOP_SIGNALS = (
    tuple(
        getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
    )
    + WARNING_SIGNALS
)


class StopRequests:
    """While entered (in the main thread), records the first stop signal instead of dying."""

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():  # where Python delivers them
            for number in STOP_SIGNALS:
                self._previous[number] = signal.signal(number, self._record)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _record(self, number: int, frame: FrameType | None) -> None:
        if number == signal.SIGINT and self.signal_number == signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C twice: stop now
        if self.signal_number is None:
            self.signal_number = number

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    @property
    def reported(self) -> int:
        """The signal to report: this process's, or SIGTERM when only a peer was asked."""
        return self.signal_number or int(signal.SIGTERM)


def signal_name(number: int) -> str:
    return signal.Signals(number).name


def interrupted(number: int, what: str, resume: str) -> TrainingInterrupted:
    """The error that ends a stopped run: which signal, what was kept, how to continue."""
    return TrainingInterrupted(
        f"stopped by {signal_name(number)}: {what}; {resume}", signal_number=number
    )


#: ``prctl`` option: the signal the kernel sends a process when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl``; None elsewhere (no parent-death signal)."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def stop_when_parent_dies() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a child process: the kernel sends the child SIGTERM when this
    process dies, however it dies (a SIGKILL included), so the child checkpoints and stops.
    ``None`` where the kernel offers no such request (not Linux)."""
    prctl = _prctl()  # looked up before the fork
    if prctl is None:
        return None
    parent = os.getpid()

    def request() -> None:
        _ask_for_sigterm(prctl, parent)

    return request


def stop_when_launcher_dies(launcher: int) -> bool:
    """The same request, made by a process for itself: SIGTERM when ``launcher``, its parent,
    dies (this process exits at once if it has died already). False where the kernel offers
    no such request (not Linux)."""
    prctl = _prctl()
    if prctl is None:
        return False
    _ask_for_sigterm(prctl, launcher)
    return True


def _ask_for_sigterm(prctl: Callable[..., int], parent: int) -> None:
    prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent:  # the parent died before the request took hold
        os._exit(128 + signal.SIGTERM)
