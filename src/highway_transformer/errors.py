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


def unknown_choice(what: str, name: object, choices: Iterable[str]) -> ConfigError:
    """An error for an unknown name that lists the valid choices and the closest match."""
    options = sorted(choices)
    close = difflib.get_close_matches(str(name), options, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {what} {name!r}; choose one of: {', '.join(options)}.{hint}")


class RunFolderBusy(HighwayError):
    """Another process owns the run folder (its lock file names the owner)."""
