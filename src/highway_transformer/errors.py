"""Errors the library raises for bad input.

Every error a user can cause derives from :class:`HighwayError`; the command line prints
its message on one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class HighwayError(Exception):
    """A problem with the user's input, configuration or data; the message says what to do."""


class ConfigError(HighwayError, ValueError):
    """An invalid configuration value or an unknown name."""


class DataError(HighwayError):
    """Missing, malformed or too-short data."""


class CheckpointError(HighwayError):
    """A checkpoint that is missing, malformed or incompatible with the request."""


class TrainingDiverged(HighwayError):
    """The loss became NaN or infinite; the last good checkpoint is left intact."""


def unknown_choice(
    what: str, name: object, choices: Iterable[str], listing: str | None = None
) -> ConfigError:
    """An error for an unknown name that names the closest matches and the valid choices.

    Long lists (more than :data:`MAX_LISTED`) are not printed in full: the message names the
    closest matches and ``listing``, the command that lists them all.
    """
    options = sorted(choices)
    close = difflib.get_close_matches(str(name), options, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    if len(options) > MAX_LISTED and listing:
        return ConfigError(f"unknown {what} {name!r}.{hint} {listing} lists all {len(options)}")
    return ConfigError(f"unknown {what} {name!r}; choose one of: {', '.join(options)}.{hint}")


class TrainingInterrupted(HighwayError):
    """A stop signal (SIGTERM, SIGINT) ended training at a step boundary, after a checkpoint
    there; the command line exits with ``128 + signal_number``, as the shell reports a signal."""

    def __init__(self, message: str, signal_number: int) -> None:
        super().__init__(message)
        self.signal_number = signal_number

    @property
    def exit_status(self) -> int:
        return 128 + self.signal_number


class RunFolderBusy(HighwayError):
    """Another process owns the run folder (its lock file names the owner)."""


class DistributedError(HighwayError):
    """A rank of a multi-process run failed or stopped answering; the last checkpoint is left
    intact."""


class PeerFailed(DistributedError):
    """A collective failed on this rank because another rank ended or stayed silent: the
    consequence of a failure elsewhere (``highway train --nproc`` reports that one instead)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class ExperimentFailed(HighwayError):
    """One or more training runs of an experiment ended with an error."""


class MissingExtra(HighwayError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


#: Longest list of choices an error message prints in full.
MAX_LISTED = 12
