"""Errors (``errors.py``): one family of error types, unknown names answered with the closest
choices on one line, long lists named by the command that lists them, and the exit status
of an interrupted run."""

from __future__ import annotations

import signal

import pytest

from highway_transformer.errors import (
    MAX_LISTED,
    CheckpointError,
    ConfigError,
    DataError,
    ExperimentFailed,
    HighwayError,
    MissingExtra,
    RunFolderBusy,
    TrainingDiverged,
    TrainingInterrupted,
    unknown_choice,
)


@pytest.mark.parametrize(
    "error",
    [ConfigError, DataError, CheckpointError, TrainingDiverged, RunFolderBusy, ExperimentFailed,
     MissingExtra],
)  # fmt: skip
def test_every_error_a_user_causes_is_a_highway_error(error: type[HighwayError]) -> None:
    assert issubclass(error, HighwayError)
    assert issubclass(ConfigError, ValueError) and issubclass(MissingExtra, ImportError)


def test_an_unknown_name_lists_the_choices_and_the_closest() -> None:
    error = unknown_choice("gate", "sdv", ["sdu", "none", "highway", "gated"])
    assert isinstance(error, ConfigError)
    assert str(error) == (
        "unknown gate 'sdv'; choose one of: gated, highway, none, sdu. Did you mean 'sdu'?"
    )
    far = unknown_choice("scale", "enormous", ["tiny", "small"])
    assert str(far) == "unknown scale 'enormous'; choose one of: small, tiny."


def test_a_long_list_is_named_by_the_command_that_lists_it() -> None:
    names = [f"row{i:02d}" for i in range(MAX_LISTED + 1)]
    error = unknown_choice("row", "row1", names, listing="`highway experiments`")
    assert str(error) == (
        "unknown row 'row1'. Did you mean 'row12' or 'row11' or 'row10'? "
        f"`highway experiments` lists all {MAX_LISTED + 1}"
    )
    short = unknown_choice("row", "x", names[:MAX_LISTED], listing="`highway experiments`")
    assert "choose one of: row00" in str(short)  # short enough: listed in full
    assert "row00" in str(unknown_choice("row", "x", names))  # no listing command: in full


def test_an_interrupted_run_exits_as_the_shell_reports_the_signal() -> None:
    stopped = TrainingInterrupted("stopped at step 4", signal.SIGTERM)
    assert stopped.exit_status == 128 + 15 and str(stopped) == "stopped at step 4"
    assert TrainingInterrupted("ctrl-c", signal.SIGINT).exit_status == 130
