"""``highway train --nproc N`` (``training/launch.py``): the started processes never relaunch,
and the launcher's outcomes become one line: the rank where a failure began named (not the
ranks that lost it as a peer), a stop in rank 0's words, the ranks' lines handed over."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch.distributed.run
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from highway_transformer.errors import ConfigError, DistributedError, TrainingInterrupted
from highway_transformer.training import launch as launch_module
from highway_transformer.training.launch import (
    LAUNCHER_ENV,
    REPORTS_ENV,
    SHUTDOWN_GRACE_S,
    hand_over,
    launch,
    outcome,
    read_reports,
    watch_launcher,
    without_nproc,
)


@pytest.mark.parametrize(
    ("argv", "kept"),
    [
        (["train", "--nproc", "2", "a=1"], ["train", "a=1"]),
        (["train", "--nproc=4", "--out", "o"], ["train", "--out", "o"]),
        (["train", "a=1", "--nproc"], ["train", "a=1"]),
        (["train", "--nprocs", "2"], ["train", "--nprocs", "2"]),  # another option: kept
        (["train", "--nproc", "2", "--max-restarts", "1", "a=1"], ["train", "a=1"]),
        (["train", "--max-restarts=3", "--nproc=2"], ["train"]),
    ],
)
def test_the_started_processes_get_no_nproc(argv: list[str], kept: list[str]) -> None:
    assert without_nproc(argv) == kept


def test_fewer_than_one_process_is_refused() -> None:
    with pytest.raises(ConfigError, match="^--nproc must be >= 1, got 0$"):
        launch(0, [])
    with pytest.raises(ConfigError, match="^--max-restarts must be >= 0, got -1$"):
        launch(2, [], max_restarts=-1)


def test_restarts_are_asked_of_torchs_launcher_and_named_when_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[int] = []

    def run(args: object) -> None:
        asked.append(args.max_restarts)
        raise ChildFailedError("train", {1: _failure(1, -signal.SIGKILL)})

    monkeypatch.setattr(torch.distributed.run, "run", run)
    with pytest.raises(DistributedError) as info:
        launch(2, [], max_restarts=2)
    assert asked == [2]
    assert str(info.value).startswith("rank 1 of 2 failed (killed by SIGKILL, after 2 restarts);")


def test_a_restarted_rank_forgets_its_report_of_the_attempt_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher must read this attempt's reports only: a rank that starts (again) deletes
    the one it left before."""
    monkeypatch.setenv(REPORTS_ENV, str(tmp_path))
    monkeypatch.setenv(LAUNCHER_ENV, str(os.getppid()))
    monkeypatch.setenv("RANK", "1")
    assert hand_over("peer", PEER)
    assert list(read_reports(tmp_path)) == [1]
    monkeypatch.setattr(launch_module, "stop_when_launcher_dies", lambda pid: True)
    watch_launcher()
    assert read_reports(tmp_path) == {}


def _launcher_raising(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> list[list[str]]:
    started: list[list[str]] = []

    def run(args: object) -> None:
        started.append([str(args.nproc_per_node), args.training_script, *args.training_script_args])
        raise error

    monkeypatch.setattr(torch.distributed.run, "run", run)
    return started


def _failure(rank: int, exitcode: int) -> ProcessFailure:
    return ProcessFailure(local_rank=rank, pid=4242 + rank, exitcode=exitcode, error_file="<N/A>")


def _report(rank: int, kind: str, line: str, number: int | None = None) -> dict:
    return {"rank": rank, "kind": kind, "line": line, "signal": number}


PEER = "rank 0: another of the 2 ranks ended or was killed (Connection closed by peer)"


@pytest.mark.parametrize(
    ("exitcode", "how", "advice"),
    [
        (-9, "killed by SIGKILL", "continue"),
        (3, "exit status 3", "fix the cause above and continue"),
    ],
)
def test_a_failed_rank_is_named_in_one_line(
    monkeypatch: pytest.MonkeyPatch, exitcode: int, how: str, advice: str
) -> None:
    started = _launcher_raising(monkeypatch, ChildFailedError("train", {1: _failure(1, exitcode)}))
    with pytest.raises(DistributedError) as info:
        launch(2, ["model.d_model=8", "--out", "o"])
    assert started == [["2", "highway_transformer.cli", "train", "model.d_model=8", "--out", "o"]]
    assert str(info.value) == (
        f"rank 1 of 2 failed ({how}); the other ranks were stopped and the last checkpoint is "
        f"intact: {advice} with --resume"
    )


@pytest.mark.parametrize("order", [(1, 0), (0, 1)])
def test_the_rank_where_a_failure_began_is_named_not_its_peers(order: tuple[int, int]) -> None:
    """Rank 1 killed; rank 0's collective failed because of it (a lost peer, reported, not
    printed): the line names rank 1, whichever the launcher saw end first."""
    ended = {0: _failure(0, 2), 1: _failure(1, -signal.SIGKILL)}
    failures = {rank: ended[rank] for rank in order}
    error = outcome(failures, {0: _report(0, "peer", PEER)}, 2)
    assert str(error).startswith("rank 1 of 2 failed (killed by SIGKILL); the other ranks")
    # ... and a rank's own error, in its own words
    oom = "out of memory; use a smaller model, batch_size or seq_len"
    reports = {0: _report(0, "peer", PEER), 1: _report(1, "failed", oom)}
    error = outcome({0: _failure(0, 2), 1: _failure(1, 2)}, reports, 2)
    assert str(error) == (
        f"rank 1 of 2: {oom} (the other ranks were stopped and the last checkpoint is intact)"
    )


def test_the_same_refusal_on_every_rank_is_said_once() -> None:
    line = "data.path=/nowhere does not exist; give the folder of the corpus"
    reports = {rank: _report(rank, "failed", line) for rank in (0, 1)}
    assert str(outcome({0: _failure(0, 2), 1: _failure(1, 2)}, reports, 2)) == line


def test_a_silent_rank_is_told_by_the_rank_that_waited_for_it() -> None:
    """The first rank to end timed out waiting; the silent rank was killed only after it."""
    line = "rank 0: no answer from another of the 2 ranks within train.dist_timeout=5s (...)"
    failures = {0: _failure(0, 2), 1: _failure(1, -signal.SIGKILL)}
    assert str(outcome(failures, {0: _report(0, "timeout", line)}, 2)) == line


def test_ranks_that_stopped_are_one_interruption_in_rank_0s_words() -> None:
    line = "stopped by SIGTERM: checkpoint at step 6 of 100 in o/checkpoint; continue with --resume"
    term = int(signal.SIGTERM)
    for failures, reports in [
        ({1: _failure(1, 143), 0: _failure(0, 143)},
         {r: _report(r, "stopped", line, term) for r in (0, 1)}),
        # rank 0 ended by the launcher's SIGTERM as it was leaving, before its report
        ({1: _failure(1, 143), 0: _failure(0, -term)}, {1: _report(1, "stopped", line, term)}),
    ]:  # fmt: skip
        error = outcome(failures, reports, 2)
        assert isinstance(error, TrainingInterrupted) and str(error) == line
        assert error.exit_status == 128 + term


def test_a_stop_passed_on_to_the_ranks_ends_as_an_interruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _launcher_raising(monkeypatch, SignalException("stop", sigval=signal.SIGTERM))
    with pytest.raises(TrainingInterrupted) as info:
        launch(3, [])
    assert info.value.exit_status == 128 + signal.SIGTERM
    assert str(info.value).startswith("stopped by SIGTERM: the 3 processes were asked to stop")
    assert f"within {SHUTDOWN_GRACE_S} s" in str(info.value)
    assert str(info.value).endswith("continue with --resume")


def test_the_ranks_reports_reach_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank (here: this process, its parent standing in for the launcher) hands its line
    over through the folder the launcher names; the launcher raises it; its environment is
    as before afterwards."""
    line = "stopped by SIGINT: checkpoint at step 2 of 9 in o/checkpoint; continue with --resume"

    def run(args: object) -> None:
        with monkeypatch.context() as rank:
            rank.setenv("RANK", "0")
            rank.setenv(LAUNCHER_ENV, str(os.getppid()))
            assert hand_over("stopped", line, int(signal.SIGINT))
        raise SignalException("stop", sigval=signal.SIGINT)

    monkeypatch.setattr(torch.distributed.run, "run", run)
    monkeypatch.delenv(REPORTS_ENV, raising=False)
    with pytest.raises(TrainingInterrupted) as info:
        launch(2, [])
    assert str(info.value) == line and info.value.exit_status == 128 + signal.SIGINT
    assert REPORTS_ENV not in os.environ and LAUNCHER_ENV not in os.environ


def test_without_a_live_launcher_a_rank_says_it_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REPORTS_ENV, str(tmp_path))
    monkeypatch.setenv(LAUNCHER_ENV, str(os.getpid()))  # not this process's parent: gone
    monkeypatch.delenv("RANK", raising=False)
    assert not hand_over("failed", "bad input")  # not a rank at all
    monkeypatch.setenv("RANK", "0")
    assert not hand_over("failed", "bad input") and not hand_over("stopped", "stopped by ...")
    monkeypatch.setenv("RANK", "1")
    assert not hand_over("peer", "rank 1: ...")
    assert hand_over("stopped", "stopped by ...")  # rank 0 tells the stop of all
    assert read_reports(tmp_path) == {}
